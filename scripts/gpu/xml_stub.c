/* libxml2's names as Debian's libLLVM-14 binds them (its Windows-manifest merger, never
 * called by bcc), for a GPU machine without libxml2: gpu_bcc.sh builds this as
 * libxml2.so.2 with xml_stub.map, used only where the machine has no libxml2.so.2. */
#include <stddef.h>

void *xmlFree;  /* a variable in libxml2: the deallocator */
#define NONE(name) void *name(void) { return NULL; }
NONE(xmlAddChild) NONE(xmlCopyNamespace) NONE(xmlDocDumpFormatMemoryEnc)
NONE(xmlDocGetRootElement) NONE(xmlDocSetRootElement) NONE(xmlFreeDoc) NONE(xmlFreeNode)
NONE(xmlFreeNs) NONE(xmlKeepBlanksDefault) NONE(xmlNewDoc) NONE(xmlNewNs) NONE(xmlNewProp)
NONE(xmlReadMemory) NONE(xmlSetGenericErrorFunc) NONE(xmlStrdup) NONE(xmlUnlinkNode)
