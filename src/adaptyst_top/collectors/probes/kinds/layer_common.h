/* What the device libraries (opencl_layer.c, cuda_inject.c) share: the monotonic clock
 * they measure their own work by, the budget they read from the monitor, the record
 * they hand timed launches over in, and a kernel name as a row's key (its whole text
 * told through a name site when it does not fit). */
#ifndef ADAPTYST_LAYER_COMMON_H
#define ADAPTYST_LAYER_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define KEY_LEN 32       /* the probes' string key, its NUL included */
#define BATCH 64         /* timed records handed over at once: bpf/module.h's BATCH_MAX */
#define UNTIMED UINT64_MAX /* a record's device_ns when it was counted, not timed */

/* A timed launch as the probe's file_batch reads it (bpf/module.h's struct timed_rec):
 * three 64-bit words. on_cpu: 1 when the device is the host's CPU. */
struct timed {
    const char *name;
    uint64_t device_ns;
    uint64_t on_cpu;
};
#define HASHED_PREFIX 22 /* a long name: 22 bytes, '~', 8 hex digits */

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* TEXT ("0.020000000", as the monitor writes it) as a share of the time; 1 (time every
 * launch) when unset or not a plain decimal. Read by hand: strtod follows the
 * program's locale, where "0.02" may not be a number. */
static inline double budget_of(const char *text) {
    double whole = 0, scale = 1;
    int digits = 0, point = 0;
    for (const char *c = text; c && *c; c++) {
        if (*c == '.' && !point) {
            point = 1;
        } else if (*c >= '0' && *c <= '9' && digits < 30) {
            whole = whole * 10 + (*c - '0');
            scale *= point ? 10 : 1;
            digits++;
        } else {
            return 1.0;
        }
    }
    return digits ? whole / scale : 1.0; /* 0: time none, count all */
}

/* TEXT as the row's key: whole when it fits, else its first bytes, '~' and a hash of
 * the whole (FNV-1a), so that long names that share a beginning stay apart. Returns the
 * whole text, copied, when it did not fit (NULL when it did, or the copy failed): the
 * name site tells it to the monitor, which shows the whole name. */
static inline char *key_text(const char *text, char *out) {
    size_t n = strlen(text);
    if (n < KEY_LEN) {
        memcpy(out, text, n + 1);
        return NULL;
    }
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)text[i]) * 16777619u;
    snprintf(out, KEY_LEN, "%.*s~%08x", HASHED_PREFIX, text, h);
    return strdup(text);
}

/* The long names among NAMES[FIRST..N) (those with a `whole`), each through PROVIDER's
 * name(key, whole) site while a monitor holds it (SEM up): a new one at once, and all of
 * them again every TELL_AGAIN_NS (*TOLD_AT), so that a monitor attached later, or a row
 * switched on later, has them too (a semaphore's count cannot tell a new monitor from an
 * old one: 1, 0, 1). A few hundred names a second cost well under 1 ms. TOLD: the next
 * new one. The caller holds the names' lock. */
#define TELL_AGAIN_NS 1000000000ll
#define TELL_NAMES(provider, sem, names, first, n, told, told_at)                       \
    do {                                                                               \
        if (!(sem)) break;                                                             \
        int64_t tell_now = now_ns();                                                   \
        if (tell_now - (told_at) >= TELL_AGAIN_NS) (told) = (first), (told_at) = tell_now; \
        for (; (told) < (n); (told)++)                                                 \
            if ((names)[told].whole)                                                   \
                DTRACE_PROBE2(provider, name, (names)[told].text, (names)[told].whole); \
    } while (0)

#endif
