/* USDT string keys from every kind of memory: read-only data the process has not mapped
 * (its own page), the heap, the stack, and a pointer to nothing. Each is passed N times
 * to a probe split by @arg1:str; the counts per string must be exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sdt.h>

/* Alone on its page, and never read by the program: the probe cannot read it there. */
static const char from_rodata[] __attribute__((aligned(4096))) = "from-rodata";
static const char pad[4096] __attribute__((used)) = {1};

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    char *heap = strdup("from-heap");
    char stack[32];
    snprintf(stack, sizeof stack, "from-stack-%d", 7);
    /* The kernel may have mapped the page with its neighbours when other read-only data
     * was first read (fault-around), or not: unmapped now, every hit finds it unmapped,
     * and the run (a few ms) usually ends before user space has read it. */
    madvise((void *)from_rodata, 4096, MADV_DONTNEED);
    for (long i = 0; i < n; i++) {
        DTRACE_PROBE1(adaptyst_keys, hit, from_rodata);
        DTRACE_PROBE1(adaptyst_keys, hit, heap);
        DTRACE_PROBE1(adaptyst_keys, hit, stack);
        DTRACE_PROBE1(adaptyst_keys, hit, (const char *)0x10000000);  /* unmapped */
    }
    free(heap);
    return 0;
}
