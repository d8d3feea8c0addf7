/* The CUDA injection library adaptyst-top puts under a command it launches with a
 * `cuda:` probe (CUDA_INJECTION64_PATH: the driver loads it at cuInit and calls
 * InitializeInjection). It turns on CUPTI's activity records of kernels, copies and
 * memsets, and reads them as CUPTI hands back each filled buffer, on CUPTI's thread:
 * nothing is added to a launch. While a probe is attached (the kernel holds the sites'
 * semaphores up), each buffer's records are counted by name and handed over:
 *
 *   adaptyst_cuda:launches(name, n)                          n launches of NAME
 *   adaptyst_cuda:timed(records, n)       n records {name, device_ns, on_cpu = 0}
 *
 * name: the kernel's name as CUPTI gives it (mangled), or "[HtoD]", "[DtoH]", "[DtoD]",
 * "[copy]" (other directions), "[memset]", "[dropped]" (records CUPTI dropped, counted
 * only); one over KEY_LEN - 1 bytes (the probes' key) keeps its first bytes and a hash
 * of the whole (layer_common.h), whose whole text is told through a third site,
 * adaptyst_cuda:name(key, whole), at once and every second while a monitor holds it. device_ns: END - START on the device's clock.
 *
 * CUPTI times every kernel; what the budget (ADAPTYST_CUDA_BUDGET, a share of the time,
 * as the monitor's --budget; unset: all) bounds is the filing: as many records are
 * handed over timed as the measured cost of doing so allows, the rest counted. Counts
 * are never sampled.
 *
 * Pitfalls users of CUPTI met, avoided here:
 * - Kernel activity enabled late makes CUPTI generate its instrumentation while the
 *   program runs (a stall of seconds: kineto PR 542); it is enabled here at cuInit.
 * - Memory that grows (under CUDA graphs, parcagpu issue 23): host buffers come from a
 *   bounded pool and go back to it after each is read; CUPTI's device buffers are
 *   bounded (DEVICE_POOL) and drained every FLUSH_MS.
 * - Records without timestamps (0, as CUPTI documents for kernels it could not time),
 *   or END before START: counted, never timed.
 * - Graph-launched kernels have no API callback: nothing here matches records to calls.
 *
 * Record layouts: the fields read (kind, start, end, name, copyKind) sit where every
 * version of the kernel, memcpy and memset records since CUDA 8 keeps them. */
#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define _SDT_HAS_SEMAPHORES 1
#include "adaptyst_sdt.h"
#include "cupti_open.h"
#include "layer_common.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_NAMES 1024             /* distinct names kept; launches of the rest: [other] */
#define NAME_SLOTS 2048            /* CUPTI's name pointer -> id, open addressing */
#define PROBES 8                   /* slots looked at for one pointer */
#define FLUSH_AT 1024              /* a name's count handed over at most this at once */
#define BUF_SIZE (256 * 1024)
#define MAX_BUFS 32                /* host memory for records: 8 MiB at most */
#define DEVICE_POOL 16             /* CUPTI's device buffers (its default: 250) */
#define FLUSH_MS 100
#define SAVED_UP_NS 1000000ll

__extension__ unsigned short adaptyst_cuda_timed_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));
__extension__ unsigned short adaptyst_cuda_launches_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));
__extension__ unsigned short adaptyst_cuda_name_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));

/* CUPTI, opened at run time: the library builds and loads without it. */
#define CUPTI_CALLS(X)                  \
    X(cuptiActivityRegisterCallbacks)   \
    X(cuptiActivityEnable)              \
    X(cuptiActivityGetNextRecord)       \
    X(cuptiActivityGetNumDroppedRecords) \
    X(cuptiActivityFlushAll)            \
    X(cuptiActivitySetAttribute)        \
    X(cuptiActivityFlushPeriod)
#define DECLARE(f) static __typeof__(f) *f##_;
CUPTI_CALLS(DECLARE)
#undef DECLARE

enum { HTOD_ID, DTOH_ID, DTOD_ID, COPY_ID, MEMSET_ID, DROPPED_ID, FIRST_KERNEL_ID };
static const char *const fixed_names[] = {"[HtoD]", "[DtoH]", "[DtoD]",
                                          "[copy]", "[memset]", "[dropped]"};
#define OTHER MAX_NAMES

struct name {
    char text[KEY_LEN];
    char *whole;  /* a name longer than its key: the whole text (else NULL) */
    uint64_t pending;  /* counted, not handed over yet */
};
static struct name names[MAX_NAMES + 1];
static int nnames = FIRST_KERNEL_ID;
static int told = FIRST_KERNEL_ID;  /* the next long name to tell (under filing) */
static int64_t told_at;  /* when every long name was last told */
static struct {
    const char *p;  /* CUPTI's name, shared by every record of one kernel */
    int id;
    char *whole;  /* a copy of the name when cached: a reused pointer is told by it */
} by_pointer[NAME_SLOTS];

static struct timed batch[BATCH];
static int nbatch;
/* Buffers may complete on CUPTI's thread and on one flushing: filed one at a time. */
static pthread_mutex_t filing = PTHREAD_MUTEX_INITIALIZER;

static uint8_t *pool[MAX_BUFS];
static uint8_t *made[MAX_BUFS];  /* every buffer lent: another's is never pooled */
static int npool, nmade;
static pid_t owner;  /* the process CUPTI was set up in: a forked child files nothing */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static double budget = 1.0;
static int64_t allowance, refilled_at;

static int probed(void) {
    return adaptyst_cuda_timed_semaphore || adaptyst_cuda_launches_semaphore;
}

static void hand_over(void) {
    if (nbatch) DTRACE_PROBE2(adaptyst_cuda, timed, batch, (uint64_t)nbatch);
    nbatch = 0;
}

static void flush(int id) {
    uint64_t n = names[id].pending;
    names[id].pending = 0;
    if (n) DTRACE_PROBE2(adaptyst_cuda, launches, names[id].text, n);
}

static void flush_all(void) {
    TELL_NAMES(adaptyst_cuda, adaptyst_cuda_name_semaphore, names, FIRST_KERNEL_ID, nnames, told,
               told_at);
    hand_over();
    for (int id = 0; id < nnames; id++) flush(id);
    flush(OTHER);
}

/* Whether to time one more record: the budget's share of the wall time since the last
 * refill, less what handing over timed records has cost (measured). */
static int may_time(void) {
    if (budget >= 1.0) return 1;
    int64_t now = now_ns();
    allowance += (int64_t)((double)(now - refilled_at) * budget);
    if (allowance > SAVED_UP_NS) allowance = SAVED_UP_NS;
    refilled_at = now;
    return allowance > 0;
}

static void time_record(int id, uint64_t ns) {
    batch[nbatch++] = (struct timed){names[id].text, ns, 0};
    if (nbatch < BATCH) return;
    int64_t t0 = budget < 1.0 ? now_ns() : 0;
    hand_over();
    if (budget < 1.0) allowance -= now_ns() - t0;
}

/* A record timed is counted by the probe with its time; the rest here. */
static void file(int id, uint64_t start, uint64_t end) {
    if (start && end >= start && may_time()) {
        time_record(id, end - start);
    } else if (++names[id].pending >= FLUSH_AT) {
        flush(id);
    }
}

/* KEY's id, interned; WHOLE: its whole text when longer than a key, kept by a new name
 * (else freed). */
static int intern(const char *key, char *whole) {
    for (int id = FIRST_KERNEL_ID; id < nnames; id++) {
        if (!strcmp(names[id].text, key)) {
            free(whole);
            return id;
        }
    }
    if (nnames == MAX_NAMES) {
        free(whole);
        return OTHER;
    }
    strcpy(names[nnames].text, key);
    names[nnames].whole = whole;
    return nnames++;
}

/* A kernel's id by CUPTI's pointer to its name (the caller files). A pointer may be
 * reused for another name once its module is gone, one alike in its first bytes too
 * (templates): a cached id stands while the whole name is still the one cached. */
static int kernel_id(const char *p) {
    if (!p) return intern("[unnamed]", NULL);
    size_t h = ((uintptr_t)p >> 3) % NAME_SLOTS;
    for (size_t i = 0; i < PROBES; i++) {
        size_t at = (h + i) % NAME_SLOTS;
        if (by_pointer[at].p == p && !strcmp(by_pointer[at].whole, p)) return by_pointer[at].id;
        if (!by_pointer[at].p || by_pointer[at].p == p) {
            h = at;
            break;
        }
    }
    char key[KEY_LEN];
    int id = intern(key, key_text(p, key));
    /* Where the walk stopped; its first slot when all were taken (that pointer is
     * looked up anew next time). A name that cannot be copied is not cached. */
    char *whole = strdup(p);
    free(by_pointer[h].whole);
    by_pointer[h].p = whole ? p : NULL;
    by_pointer[h].whole = whole;
    by_pointer[h].id = id;
    return id;
}

static int copy_id(uint8_t kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return HTOD_ID;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return DTOH_ID;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return DTOD_ID;
    default: return COPY_ID;
    }
}

static void file_buffer(uint8_t *buffer, size_t valid) {
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord_(buffer, valid, &r) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const CUpti_ActivityKernel9 *k = (const void *)r;
            file(kernel_id(k->name), k->start, k->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const void *)r;
            file(copy_id(m->copyKind), m->start, m->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const void *)r;
            file(MEMSET_ID, m->start, m->end);
            break;
        }
        default:
            break;
        }
    }
}

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&pool_lock);
    if (npool) {
        b = pool[--npool];
    } else if (nmade < MAX_BUFS && (b = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, BUF_SIZE))) {
        made[nmade++] = b;
    }
    pthread_mutex_unlock(&pool_lock);
    *buffer = b;
    *size = b ? BUF_SIZE : 0;  /* none: CUPTI drops records, and counts them */
    *max_records = 0;
}

/* Whether BUFFER is one lent here; else, once, a line: another CUPTI user's (callbacks
 * registered before ours hand their buffers back to us). */
static int ours(const uint8_t *buffer) {
    static int said;
    pthread_mutex_lock(&pool_lock);
    int found = 0;
    for (int i = 0; i < nmade && !found; i++) found = made[i] == buffer;
    pthread_mutex_unlock(&pool_lock);
    if (!found && !said++)
        fputs("adaptyst-top: CUPTI handed back a buffer another tool lent it: read, "
              "left to its owner\n", stderr);
    return found;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                               size_t valid) {
    (void)size;
    if (getpid() != owner) return;  /* a forked child: its CUPTI is not set up */
    pthread_mutex_lock(&filing);
    if (probed()) {
        if (buffer) file_buffer(buffer, valid);
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords_(ctx, stream, &dropped) == CUPTI_SUCCESS) {
            for (; dropped > 0; dropped -= dropped < FLUSH_AT ? dropped : FLUSH_AT) {
                names[DROPPED_ID].pending += dropped < FLUSH_AT ? dropped : FLUSH_AT;
                flush(DROPPED_ID);
            }
        }
        flush_all();
    }
    pthread_mutex_unlock(&filing);
    if (!buffer || !ours(buffer)) return;
    pthread_mutex_lock(&pool_lock);
    pool[npool++] = buffer;  /* one of MAX_BUFS lent, back once: the pool has room */
    pthread_mutex_unlock(&pool_lock);
}

/* Not in a forked child: CUPTI's thread is not there, and a flush waits for it (a
 * hang at exit, HPCToolkit issue 195). */
static void at_exit(void) {
    if (getpid() == owner) cuptiActivityFlushAll_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* A fork while a lock is held would leave it held in the child; the child's copy of
 * the pending counts would be handed over twice. */
static void before_fork(void) {
    pthread_mutex_lock(&filing);
    pthread_mutex_lock(&pool_lock);
}
static void after_fork_parent(void) {
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&filing);
}
static void after_fork_child(void) {
    for (int id = 0; id <= MAX_NAMES; id++) names[id].pending = 0;
    nbatch = 0;
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&filing);
}

/* Called once by the driver, in cuInit; 1: loaded. Anything missing leaves the program
 * as it was, with one line on stderr. */
EXPORT int InitializeInjection(void) {
    static int done;
    if (done++) return 1;
    void *h = open_cupti();
    if (!h) {
        fputs("adaptyst-top: no libcupti found (set ADAPTYST_CUPTI to its path): "
              "cuda: rows stay empty\n", stderr);
        return 1;
    }
#define FIND(f) f##_ = (__typeof__(f) *)dlsym(h, #f);
    CUPTI_CALLS(FIND)
#undef FIND
    if (!cuptiActivityRegisterCallbacks_ || !cuptiActivityEnable_ ||
        !cuptiActivityGetNextRecord_ || !cuptiActivityGetNumDroppedRecords_ ||
        !cuptiActivityFlushAll_) {
        fputs("adaptyst-top: this libcupti lacks the activity API: cuda: rows stay empty\n",
              stderr);
        return 1;
    }
    for (int id = 0; id < FIRST_KERNEL_ID; id++) strcpy(names[id].text, fixed_names[id]);
    strcpy(names[OTHER].text, "[other]");
    budget = budget_of(getenv("ADAPTYST_CUDA_BUDGET"));
    refilled_at = now_ns();
    owner = getpid();
    if (cuptiActivitySetAttribute_) {
        size_t limit = DEVICE_POOL, n = sizeof limit;
        cuptiActivitySetAttribute_(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &n, &limit);
    }
    if (cuptiActivityRegisterCallbacks_(requested, completed) != CUPTI_SUCCESS) {
        fputs("adaptyst-top: CUPTI refused its activity callbacks (another tool holds "
              "them?): cuda: rows stay empty\n", stderr);
        return 1;
    }
    static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                               CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};
    static const char *const kind_names[] = {" kernels", " copies", " memsets"};
    char refused[32] = "";
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (cuptiActivityEnable_(kinds[i]) != CUPTI_SUCCESS) strcat(refused, kind_names[i]);
    if (*refused)  /* one line: a CUPTI with no driver or GPU under it refuses them all */
        fprintf(stderr, "adaptyst-top: CUPTI would not record%s (set ADAPTYST_CUPTI to the "
                "CUPTI of the program's CUDA): their cuda: rows stay empty\n", refused);
    if (cuptiActivityFlushPeriod_) cuptiActivityFlushPeriod_(FLUSH_MS);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(at_exit);
    return 1;
}
