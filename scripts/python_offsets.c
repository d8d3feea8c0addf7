#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX < 0x03090000
#include <internal/pycore_pystate.h>
#include <frameobject.h>
#else
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_frame.h>
#elif PY_VERSION_HEX >= 0x03090000
#include <frameobject.h>
#endif
#define P(name, expr) printf("\"%s\": %ld, ", name, (long)(expr))
int main(void) {
    printf("{");
    P("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030B0000
    P("interp_tstate_head", offsetof(PyInterpreterState, threads.head));
#else
    P("interp_tstate_head", offsetof(PyInterpreterState, tstate_head));
#endif
    P("tstate_next", offsetof(PyThreadState, next));
    P("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
    P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#endif
#if PY_VERSION_HEX >= 0x030D0000
    P("tstate_frame", offsetof(PyThreadState, current_frame));
    P("cframe_frame", -1);
#elif PY_VERSION_HEX >= 0x030B0000
    P("tstate_frame", offsetof(PyThreadState, cframe));
    P("cframe_frame", offsetof(_PyCFrame, current_frame));
#else
    P("tstate_frame", offsetof(PyThreadState, frame));
    P("cframe_frame", -1);
#endif
#if PY_VERSION_HEX >= 0x030D0000
    P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
    P("frame_back", offsetof(_PyInterpreterFrame, previous));
    P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#elif PY_VERSION_HEX >= 0x030C0000
    P("frame_code", offsetof(_PyInterpreterFrame, f_code));
    P("frame_back", offsetof(_PyInterpreterFrame, previous));
    P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#elif PY_VERSION_HEX >= 0x030B0000
    P("frame_code", offsetof(_PyInterpreterFrame, f_code));
    P("frame_back", offsetof(_PyInterpreterFrame, previous));
    P("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#else
    P("frame_code", offsetof(PyFrameObject, f_code));
    P("frame_back", offsetof(PyFrameObject, f_back));
#endif
    P("code_filename", offsetof(PyCodeObject, co_filename));
    P("code_name", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030B0000
    P("code_qualname", offsetof(PyCodeObject, co_qualname));
#endif
    P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
    P("unicode_length", offsetof(PyASCIIObject, length));
    P("unicode_state", offsetof(PyASCIIObject, state));
    P("unicode_ascii_data", sizeof(PyASCIIObject));
    P("unicode_compact_data", sizeof(PyCompactUnicodeObject));
    printf("\"object_type\": %zu}\n", offsetof(PyObject, ob_type));
    return 0;
}
