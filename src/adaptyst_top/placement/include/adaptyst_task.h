/* adaptyst-top task API for C and C++ (header only).
 *
 *     #include "adaptyst_task.h"       cc -I"$INC" app.c -lm, where INC is printed by
 *     python3 -c 'from adaptyst_top.placement.task_api import INCLUDE_DIR; print(INCLUDE_DIR)'
 *
 *     adaptyst_task t;
 *     adaptyst_task_begin(&t, "spmv", "cpu", nnz, density);   // feature: <0 for none
 *     run_spmv(...);
 *     adaptyst_task_end(&t);
 *
 * Fires the same USDT probes as the Python API, adaptyst:task_begin(key, task, device,
 * size, feature_milli) and adaptyst:task_end(key, size), with the same key
 * "task|device|log2 size|feature bucket" (31 bytes at most), so the monitor's advisor
 * learns from a C program as from a Python one:
 *
 *     adaptyst-top --advisor --probe 'usdt:./app:adaptyst:task_begin..task_end@arg1' -- ./app
 *
 * A probe site is a 5-byte nop until a tracer attaches (Linux 6.18+ then turns it into a
 * call rather than a trap: about half the cost); the key is formatted on every call
 * (a snprintf, well under a microsecond). Without <sys/sdt.h> (systemtap-sdt-dev) the
 * functions compile to nothing but the key.
 *
 * Fortran: define ADAPTYST_TASK_IMPLEMENTATION in one C file that includes this header;
 * it then also defines adaptyst_task_begin_c / adaptyst_task_end_c, plain C symbols
 * that adaptyst_task.f90 binds with ISO_C_BINDING. */
#ifndef ADAPTYST_TASK_H
#define ADAPTYST_TASK_H

#include <math.h>
#include <stdio.h>

#include "adaptyst_sdt.h"  /* the probe sites, on 5-byte nops the kernel can optimize */

#define ADAPTYST_NO_FEATURE (-1.0)

typedef struct {
    char key[32];
    long long size;
} adaptyst_task;

/* log2 of the input size: inputs within a factor of two share statistics. */
static inline int adaptyst_size_bucket(long long size) {
    unsigned long long u = size < 0 ? 0ULL - (unsigned long long)size : (unsigned long long)size;
    return u == 0 ? 0 : 63 - __builtin_clzll(u);
}

/* A feature in (0, 1] (e.g. density) in half-decades: 0 = none, 1 = 1..0.3, ... */
static inline int adaptyst_feature_bucket(double feature) {
    if (!(feature > 0)) return 0;
    int b = (int)(-2.0 * log10(feature < 1.0 ? feature : 1.0));
    return 1 + (b < 14 ? b : 14);
}

static inline void adaptyst_task_begin(adaptyst_task *t, const char *task, const char *device,
                                       long long size, double feature) {
    long long milli = feature < 0 ? -1 : (long long)(feature * 1000.0);
    snprintf(t->key, sizeof t->key, "%s|%s|%d|%d", task, device, adaptyst_size_bucket(size),
             adaptyst_feature_bucket(feature));
    t->size = size;
    DTRACE_PROBE5(adaptyst, task_begin, t->key, task, device, size, milli);
    (void)milli;
}

static inline void adaptyst_task_end(const adaptyst_task *t) {
    DTRACE_PROBE2(adaptyst, task_end, t->key, t->size);
    (void)t;
}

#ifdef ADAPTYST_TASK_IMPLEMENTATION
/* For Fortran (and anything else that cannot use an inline function): null-terminated
 * strings, size and feature by value. */
void adaptyst_task_begin_c(adaptyst_task *t, const char *task, const char *device,
                           long long size, double feature) {
    adaptyst_task_begin(t, task, device, size, feature);
}

void adaptyst_task_end_c(const adaptyst_task *t) { adaptyst_task_end(t); }
#endif

#endif
