/* The Python layer adaptyst-top puts under a command it launches with a `python:` probe:
 * the hook (python_hook/sitecustomize.py, on the command's PYTHONPATH) times each call
 * of the Python functions the probes name and hands them over here through ctypes,
 * BATCH at a time (one probe hit for them all), through one USDT site:
 *
 *   adaptyst_py:timed(records, n)          n records {name, ns, on_cpu = 1}
 *
 * name: the function's qualified name as the row's key (layer_common.h's key_text, done
 * by the hook); ns: the call's entry to its return, on the monotonic clock. The second
 * site, adaptyst_py:launches(name, n), is the device kinds' counted-only one: the hook
 * times every call, so it is never hit. A plain shared library, not an extension: every
 * CPython on the node loads the same one.
 *
 * adaptyst_py_probed() says whether a probe holds a site (its semaphore is up): the
 * hook stops timing while none does. A name longer than a key is told whole through a
 * third site, adaptyst_py:name(key, whole), while adaptyst_py_name_wanted() (its
 * semaphore) says a monitor holds it: at once and every second (layer_common.h). */
#define _SDT_HAS_SEMAPHORES 1
#include "adaptyst_sdt.h"
#include "layer_common.h"

#define EXPORT __attribute__((visibility("default")))

__extension__ unsigned short adaptyst_py_timed_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));
__extension__ unsigned short adaptyst_py_launches_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));
__extension__ unsigned short adaptyst_py_name_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));

EXPORT int adaptyst_py_probed(void) {
    return adaptyst_py_timed_semaphore != 0;
}

/* N calls: NAMES[i] (key text) took NS[i] nanoseconds. */
EXPORT void adaptyst_py_timed(const char *const *names, const uint64_t *ns, uint64_t n) {
    struct timed batch[BATCH];
    while (n > 0) {
        uint64_t take = n < BATCH ? n : BATCH;
        for (uint64_t i = 0; i < take; i++) {
            batch[i].name = names[i];
            batch[i].device_ns = ns[i];
            batch[i].on_cpu = 1;
        }
        DTRACE_PROBE2(adaptyst_py, timed, batch, take);
        names += take;
        ns += take;
        n -= take;
    }
}

EXPORT void adaptyst_py_launches(const char *name, uint64_t n) {
    DTRACE_PROBE2(adaptyst_py, launches, name, n);
}

EXPORT unsigned adaptyst_py_name_wanted(void) {
    return adaptyst_py_name_semaphore;
}

EXPORT void adaptyst_py_name(const char *key, const char *whole) {
    DTRACE_PROBE2(adaptyst_py, name, key, whole);
}
