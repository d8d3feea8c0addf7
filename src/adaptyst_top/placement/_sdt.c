/* USDT probe sites for the task API: adaptyst:task_begin / adaptyst:task_end.
 * A probe site is a 5-byte nop until a tracer attaches, so this costs nothing
 * when no monitor runs. Built without sys/sdt.h the functions still exist and do
 * nothing (HAS_SDT says which). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "include/adaptyst_sdt.h"  /* sites on 5-byte nops the kernel can optimize */
#define HAS_SDT ADAPTYST_HAS_SDT

/* task_begin(key, task, device, size, feature_milli)
 *   key: "task|device|size bucket|feature bucket" (<= 31 bytes): the monitor splits its
 *        in-kernel statistics by it (usdt:...:adaptyst:task_begin..task_end@arg1). */
static PyObject *task_begin(PyObject *self, PyObject *args) {
    const char *key, *task, *device;
    long long size, feature_milli;
    if (!PyArg_ParseTuple(args, "sssLL", &key, &task, &device, &size, &feature_milli))
        return NULL;
    DTRACE_PROBE5(adaptyst, task_begin, key, task, device, size, feature_milli);
    Py_RETURN_NONE;
}

static PyObject *task_end(PyObject *self, PyObject *args) {
    const char *key;
    long long size;
    if (!PyArg_ParseTuple(args, "sL", &key, &size))
        return NULL;
    DTRACE_PROBE2(adaptyst, task_end, key, size);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"task_begin", task_begin, METH_VARARGS, "Fire adaptyst:task_begin(key, task, device, size, feature_milli)."},
    {"task_end", task_end, METH_VARARGS, "Fire adaptyst:task_end(key, size)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sdt", "USDT sites of the task API.", -1, methods};

PyMODINIT_FUNC PyInit__sdt(void) {
    PyObject *m = PyModule_Create(&module);
    if (m) PyModule_AddIntConstant(m, "HAS_SDT", HAS_SDT);
    return m;
}
