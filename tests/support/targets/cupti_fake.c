/* A fake of CUPTI's activity API and of the driver's side of it, for the tests where no
 * GPU is: built as libcupti.so.12 against CUPTI's own headers, so that its names,
 * results and record layouts are CUPTI's. The driver's part (fake_*) is what a test
 * program calls in place of cuInit and of launches: cuInit loads the library named in
 * CUDA_INJECTION64_PATH and calls its InitializeInjection, as the driver does; each
 * launch writes a record into the buffer the tool handed over and hands it back when
 * full, at the flush period (from a thread of its own, as CUPTI's), or at a flush. */
#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static int enabled[CUPTI_ACTIVITY_KIND_COUNT];
static uint8_t *buf;
static size_t cap, used;
static size_t dropped;
static uint32_t period_ms;
static size_t device_pool_limit = 250;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t flusher;
static int stopping;

/* What the test reads back: buffers held by the tool at most at once, and in all. */
static long held, held_max, asked;

static size_t record_size(CUpti_ActivityKind kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel9);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    default: return sizeof(CUpti_Activity);
    }
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
    if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
    requested = req;
    completed = done;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
    enabled[kind] = 1;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size,
                                               void *value) {
    if (!size || !value) return CUPTI_ERROR_INVALID_PARAMETER;
    if (attr == CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT && *size == sizeof(size_t)) {
        device_pool_limit = *(size_t *)value;
        return CUPTI_SUCCESS;
    }
    return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                CUpti_Activity **record) {
    uint8_t *at = *record ? (uint8_t *)*record + record_size((*record)->kind) : buffer;
    if (at + sizeof(CUpti_Activity) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)at;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
                                                       size_t *n) {
    (void)ctx, (void)stream;
    if (!n) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    *n = dropped;
    dropped = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

/* The buffer being filled, handed back (outside the lock: the tool's callback asks
 * for the dropped records). */
static void hand_back(void) {
    pthread_mutex_lock(&lock);
    uint8_t *b = buf;
    size_t n = used;
    buf = NULL, used = 0;
    if (b) held--;
    pthread_mutex_unlock(&lock);
    if (b) completed(NULL, 0, b, cap, n);
}

static pid_t flusher_pid;  /* the process the flusher thread runs in */

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    if (period_ms && getpid() != flusher_pid) {
        /* A forked child: CUPTI's flush waits for its thread, which fork left behind
         * (a hang, HPCToolkit issue 195); here, 10 s and a status that says so. */
        sleep(10);
        _exit(98);
    }
    if (completed) hand_back();
    return CUPTI_SUCCESS;
}

static void *flush_every_period(void *unused) {
    (void)unused;
    struct timespec ts = {period_ms / 1000, (long)(period_ms % 1000) * 1000000};
    while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
        nanosleep(&ts, NULL);
        hand_back();
    }
    return NULL;
}

CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t ms) {
    if (period_ms || !ms) return CUPTI_SUCCESS;
    period_ms = ms;
    flusher_pid = getpid();
    return pthread_create(&flusher, NULL, flush_every_period, NULL) ? CUPTI_ERROR_UNKNOWN
                                                                  : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str) {
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fake)";
    return CUPTI_SUCCESS;
}

/* ---- the driver's part ---- */

/* cuInit: the injection library loaded and initialized, as the driver does. */
int fake_cuda_init(void) {
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (!path || !*path) return 0;
    void *h = dlopen(path, RTLD_NOW);
    int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
    return init ? init() : -1;
}

/* Room for one record of KIND, or NULL (dropped: the tool gave no buffer). */
static void *room(CUpti_ActivityKind kind) {
    size_t size = record_size(kind);
    if (!enabled[kind] || !requested) return NULL;
    for (int tries = 0; tries < 2; tries++) {
        pthread_mutex_lock(&lock);
        if (buf && used + size <= cap) {
            void *at = buf + used;
            used += size;
            memset(at, 0, size);
            return at;  /* the caller fills it, then unlocks */
        }
        int full = buf != NULL;
        pthread_mutex_unlock(&lock);
        if (full) hand_back();
        uint8_t *b = NULL;
        size_t n = 0, max_records = 0;
        requested(&b, &n, &max_records);
        pthread_mutex_lock(&lock);
        asked++;
        if (b && n >= size) {
            buf = b, cap = n, used = 0;
            if (++held > held_max) held_max = held;
        } else {
            dropped++;
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

void fake_kernel(const char *name, uint64_t start, uint64_t end, uint32_t graph) {
    CUpti_ActivityKernel9 *k = room(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (!k) return;
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = start, k->end = end, k->name = name;
    k->graphId = graph, k->graphNodeId = graph ? graph * 100u + 1 : 0;
    k->gridX = k->gridY = k->gridZ = 1;
    pthread_mutex_unlock(&lock);
}

void fake_memcpy(uint8_t kind, uint64_t bytes, uint64_t start, uint64_t end) {
    CUpti_ActivityMemcpy6 *m = room(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (!m) return;
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = kind, m->bytes = bytes, m->start = start, m->end = end;
    pthread_mutex_unlock(&lock);
}

void fake_memset(uint64_t bytes, uint64_t start, uint64_t end) {
    CUpti_ActivityMemset4 *m = room(CUPTI_ACTIVITY_KIND_MEMSET);
    if (!m) return;
    m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m->bytes = bytes, m->start = start, m->end = end;
    pthread_mutex_unlock(&lock);
}

/* N buffers asked for and kept, as N streams' would be: how many the tool lent. Records
 * then find no buffer (dropped) until fake_release hands them back, empty. */
static uint8_t *hoarded[4096];
static long nhoarded;

long fake_hoard(long n) {
    hand_back();
    for (long i = 0; i < n && nhoarded < 4096; i++) {
        uint8_t *b = NULL;
        size_t size = 0, max_records = 0;
        requested(&b, &size, &max_records);
        asked++;
        if (!b || !size) break;
        hoarded[nhoarded++] = b;
        if (++held > held_max) held_max = held;
    }
    return nhoarded;
}

void fake_release(void) {
    for (long i = 0; i < nhoarded; i++) {
        held--;
        completed(NULL, 0, hoarded[i], 0, 0);
    }
    nhoarded = 0;
}

/* K kernel records named NAME in a buffer the tool never lent, handed back to it: as a
 * program's own CUPTI client's, registered before the tool's, would come. */
void fake_foreign(long k, const char *name) {
    size_t size = (size_t)k * sizeof(CUpti_ActivityKernel9);
    uint8_t *b = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, size ? size : 8);
    if (!b) return;
    memset(b, 0, size);
    for (long i = 0; i < k; i++) {
        CUpti_ActivityKernel9 *r = (CUpti_ActivityKernel9 *)(b + i * sizeof *r);
        r->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        r->start = 1000000, r->end = 1000000 + 2000, r->name = name;
    }
    completed(NULL, 0, b, size, size);
    free(b);
}

void fake_stats(long *buffers_held_max, long *buffers_asked, size_t *pool_limit) {
    pthread_mutex_lock(&lock);
    *buffers_held_max = held_max, *buffers_asked = asked, *pool_limit = device_pool_limit;
    pthread_mutex_unlock(&lock);
}

/* The flusher stopped before exit: the tool's own flush at exit is the last. */
void fake_stop(void) {
    if (!period_ms) return;
    __atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
    pthread_join(flusher, NULL);
}
