/* The OpenCL layer adaptyst-top puts under a command it launches with an `opencl:` probe
 * (OPENCL_LAYERS, read by the Khronos loader and by ocl-icd 2.3 and newer). Every queue
 * the program creates has profiling enabled. While the probe is attached (the kernel
 * holds the sites' semaphores up), every kernel launch and buffer transfer is counted
 * here, by name, and handed over in batches through one USDT site:
 *
 *   adaptyst_cl:launches(name, n)                               n launches of NAME
 *
 * and some of them are timed on the device's clock: an event callback reads the
 * command's timestamps when it completes, and the timed launches are handed over BATCH
 * at a time (one probe hit for them all, where a hit each cost ~1 us here):
 *
 *   adaptyst_cl:timed(records, n)          n records {name, device_ns, on_cpu}
 *
 * A name longer than a key is a key of its first bytes and a hash (layer_common.h), and
 * its whole text goes to the monitor through a third site (at once, and every second
 * while a monitor holds it):
 *
 *   adaptyst_cl:name(key, whole)
 *
 * name: the kernel's function name, or "[read]", "[write]", "[copy]" for transfers;
 * device_ns: END - START as the device timed it (~0: counted, not timed); on_cpu: 1
 * when the device is the host's CPU (PoCL's), whose time is the CPU's energy.
 *
 * Which launches are timed: as many as ADAPTYST_CL_BUDGET (a share of the time, from
 * the monitor's --budget; 1 or more, or unset: every one) allows, the layer measuring
 * what its own timing work costs (the callback, the event's reference, the site's
 * hit) and spending at most that share of the wall time on it. Counting is never
 * sampled: a launch costs an atomic add, and a site hit every FLUSH_AT launches of a
 * name. Both are handed over every FLUSH_NS while launching, at clFinish,
 * clWaitForEvents and a blocking transfer, and at exit.
 *
 * Nothing waits: callbacks run on the runtime's thread. Each timed launch in flight
 * holds one event reference until its callback (its name's id rides as the callback's
 * pointer), so memory follows what the program has queued. With no probe attached an enqueue costs one load of a
 * semaphore. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_layer.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define _SDT_HAS_SEMAPHORES 1
#include "adaptyst_sdt.h"
#include "layer_common.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_NAMES 1024             /* distinct names kept; launches of the rest: [other] */
#define OTHER MAX_NAMES
#define KERNEL_SLOTS 4096          /* cl_kernel -> name, open addressing */
#define FLUSH_AT 1024
#define FLUSH_NS 50000000ll
#define SAVED_UP_NS 1000000ll      /* timing work that may be saved up: 1 ms */
#define REFILL_NS 10000ll
#define QUEUE_SLOTS 64             /* queue -> whether its device is a CPU */
#define MAX_QUEUE_PROPS 64
#define GONE ((cl_kernel)(uintptr_t)1)  /* a released kernel's slot */

/* Raised by the kernel (uprobe ref_ctr_offset) while a probe is attached to the site. */
__extension__ unsigned short adaptyst_cl_timed_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));
__extension__ unsigned short adaptyst_cl_launches_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));
__extension__ unsigned short adaptyst_cl_name_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));

static struct _cl_icd_dispatch next;  /* the layer below: the loader's dispatch */
static struct _cl_icd_dispatch ours;

enum { READ_ID, WRITE_ID, COPY_ID, FIRST_KERNEL_ID };
struct name {
    char text[KEY_LEN];
    char *whole;  /* a name longer than its key: the whole text (else NULL) */
    _Atomic uint64_t pending;  /* launches counted, not handed over yet */
};
static struct name names[MAX_NAMES + 1];  /* zeroed; the fixed ones named at init */
static int nnames = FIRST_KERNEL_ID;
static int told = FIRST_KERNEL_ID;  /* the next long name to tell (names_lock) */
static int64_t told_at;  /* when every long name was last told */
static struct {
    cl_kernel k;
    int id;
} kernels[KERNEL_SLOTS];
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;  /* names and kernels */

static double budget = 1.0;
static _Atomic int64_t allowance;  /* ns of timing work that may be spent now */
static _Atomic int64_t refilled_at, flushed_at;

static struct timed batch[BATCH];
static int nbatch;
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;  /* batch, queues */
static struct {
    cl_command_queue q;
    int cpu;
} queues[QUEUE_SLOTS];

static int probed(void) {
    return adaptyst_cl_timed_semaphore || adaptyst_cl_launches_semaphore;
}

static void flush(int id) {
    uint64_t n = atomic_exchange_explicit(&names[id].pending, 0, memory_order_relaxed);
    if (n) DTRACE_PROBE2(adaptyst_cl, launches, names[id].text, n);
}

/* The timed launches so far, handed over (the caller holds batch_lock: the probe reads
 * the records while it runs, on this thread). */
static void hand_over(void) {
    if (nbatch) DTRACE_PROBE2(adaptyst_cl, timed, batch, (uint64_t)nbatch);
    nbatch = 0;
}

static void flush_all(int64_t now) {
    atomic_store_explicit(&flushed_at, now, memory_order_relaxed);
    pthread_mutex_lock(&names_lock);
    TELL_NAMES(adaptyst_cl, adaptyst_cl_name_semaphore, names, FIRST_KERNEL_ID, nnames, told,
               told_at);
    pthread_mutex_unlock(&names_lock);
    pthread_mutex_lock(&batch_lock);
    hand_over();
    pthread_mutex_unlock(&batch_lock);
    pthread_mutex_lock(&names_lock);
    int n = nnames;
    pthread_mutex_unlock(&names_lock);
    for (int id = 0; id < n; id++) flush(id);
    flush(OTHER);
}

static void count(int id) {
    if (atomic_fetch_add_explicit(&names[id].pending, 1, memory_order_relaxed) + 1 >= FLUSH_AT)
        flush(id);
}

static void flush_if_due(int64_t now) {
    if (now - atomic_load_explicit(&flushed_at, memory_order_relaxed) > FLUSH_NS) flush_all(now);
}

/* Whether to time this launch: the share of the time saved up since the last one. */
static int may_time(int64_t now) {
    if (budget >= 1.0) return 1;
    int64_t last = atomic_load_explicit(&refilled_at, memory_order_relaxed);
    /* Refilled every 10 us at most: a compare-and-swap a launch was a third of the cost
     * of counting it. */
    if (now - last > REFILL_NS && atomic_compare_exchange_strong(&refilled_at, &last, now)) {
        int64_t add = (int64_t)((double)(now - last) * budget);
        if (atomic_fetch_add(&allowance, add) + add > SAVED_UP_NS)
            atomic_store(&allowance, SAVED_UP_NS);  /* a spent() meanwhile: lost, at most 1 ms */
    }
    return atomic_load_explicit(&allowance, memory_order_relaxed) > 0;
}

static void spent(int64_t ns) {
    if (budget < 1.0) atomic_fetch_sub_explicit(&allowance, ns, memory_order_relaxed);
}

static int profiling(cl_event ev, cl_profiling_info what, cl_ulong *out) {
    return next.clGetEventProfilingInfo(ev, what, sizeof *out, out, NULL) == CL_SUCCESS;
}

/* Whether EV's command ran on a CPU device; by its queue, cached (a queue made at a
 * cached address is forgotten there). */
static int on_cpu(cl_event ev) {
    cl_command_queue q = NULL;
    cl_device_id d = NULL;
    cl_device_type t = 0;
    if (next.clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL) != CL_SUCCESS || !q)
        return 0;
    size_t h = ((uintptr_t)q >> 4) % QUEUE_SLOTS;
    pthread_mutex_lock(&batch_lock);
    int cached = queues[h].q == q ? queues[h].cpu : -1;
    pthread_mutex_unlock(&batch_lock);
    if (cached >= 0) return cached;
    int cpu = next.clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof d, &d, NULL) == CL_SUCCESS &&
              d && next.clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL) == CL_SUCCESS &&
              (t & CL_DEVICE_TYPE_CPU);
    pthread_mutex_lock(&batch_lock);
    queues[h].q = q;
    queues[h].cpu = cpu;
    pthread_mutex_unlock(&batch_lock);
    return cpu;
}

static void forget_queue(cl_command_queue q) {
    size_t h = ((uintptr_t)q >> 4) % QUEUE_SLOTS;
    pthread_mutex_lock(&batch_lock);
    if (queues[h].q == q) queues[h].q = NULL;
    pthread_mutex_unlock(&batch_lock);
}

static void CL_CALLBACK completed(cl_event ev, cl_int status, void *user) {
    int64_t t0 = now_ns();
    int id = (int)(intptr_t)user;  /* the name's id, carried as the callback's pointer */
    cl_ulong start = 0, end = 0;
    struct timed t = {names[id].text, UNTIMED, 0};
    if (status == CL_COMPLETE && profiling(ev, CL_PROFILING_COMMAND_START, &start) &&
        profiling(ev, CL_PROFILING_COMMAND_END, &end) && end >= start) {
        t.device_ns = end - start;
        t.on_cpu = (uint64_t)on_cpu(ev);
    }
    next.clReleaseEvent(ev);  /* ours, or the reference taken for this callback */
    pthread_mutex_lock(&batch_lock);
    batch[nbatch++] = t;
    if (nbatch == BATCH) hand_over();
    pthread_mutex_unlock(&batch_lock);
    spent(now_ns() - t0);
}

/* The name's id, interned (the caller holds names_lock); WHOLE: its whole text when
 * longer than its key, kept by a new name (else freed). */
static int intern(const char *text, char *whole) {
    for (int id = FIRST_KERNEL_ID; id < nnames; id++) {
        if (!strcmp(names[id].text, text)) {
            free(whole);
            return id;
        }
    }
    if (nnames == MAX_NAMES) {
        free(whole);
        return OTHER;
    }
    strcpy(names[nnames].text, text);
    names[nnames].whole = whole;
    return nnames++;
}

/* K's name as a key in OUT; its whole text when longer (else NULL). */
static char *kernel_name(cl_kernel k, char *out) {
    size_t n = 0;
    char *long_name = NULL;
    strcpy(out, "[unnamed]");
    if (next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, 0, NULL, &n) != CL_SUCCESS || n == 0)
        return NULL;
    char *whole = malloc(n + 1);
    if (whole && next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, n, whole, NULL) == CL_SUCCESS) {
        whole[n] = 0;  /* a runtime that returns no NUL of its own */
        long_name = key_text(whole, out);
    }
    free(whole);
    return long_name;
}

/* Bumped whenever a kernel is made (its address may be a released one's): a thread's
 * last lookup stands while it holds. */
static _Atomic unsigned kernels_changed;
static __thread cl_kernel last_kernel;
static __thread int last_id;
static __thread unsigned last_seen;

static int cached_id(cl_kernel k);

/* K's name id: the thread's last kernel's without a lock (a loop launches one kernel
 * again and again), else looked up once per kernel object, then from the cache. */
static int name_id(cl_kernel k) {
    unsigned seen = atomic_load_explicit(&kernels_changed, memory_order_acquire);
    if (k == last_kernel && seen == last_seen) return last_id;
    int id = cached_id(k);
    last_kernel = k, last_id = id, last_seen = seen;
    return id;
}

/* K's slot in the cache, or KERNEL_SLOTS; *FREE_AT: where it would go (KERNEL_SLOTS: the
 * cache is full). The caller holds names_lock. */
static size_t slot_of(cl_kernel k, size_t *free_at) {
    size_t h = ((uintptr_t)k >> 4) % KERNEL_SLOTS;
    *free_at = KERNEL_SLOTS;
    for (size_t i = 0; i < KERNEL_SLOTS; i++, h = (h + 1) % KERNEL_SLOTS) {
        if (kernels[h].k == k) return h;
        if ((kernels[h].k == GONE || !kernels[h].k) && *free_at == KERNEL_SLOTS) *free_at = h;
        if (!kernels[h].k) break;
    }
    return KERNEL_SLOTS;
}

static int cached_id(cl_kernel k) {
    size_t free_at, h;
    pthread_mutex_lock(&names_lock);
    if ((h = slot_of(k, &free_at)) < KERNEL_SLOTS) {
        int id = kernels[h].id;
        pthread_mutex_unlock(&names_lock);
        return id;
    }
    char text[KEY_LEN];
    char *whole = kernel_name(k, text);
    int id = intern(text, whole);
    if (free_at < KERNEL_SLOTS) {  /* a full cache: asked again next time */
        kernels[free_at].k = k;
        kernels[free_at].id = id;
    }
    pthread_mutex_unlock(&names_lock);
    return id;
}

static void forget(cl_kernel k) {
    size_t free_at, h;
    pthread_mutex_lock(&names_lock);
    if ((h = slot_of(k, &free_at)) < KERNEL_SLOTS) kernels[h].k = GONE;
    /* Whether cached or not (a full cache): a thread's last lookup may name it. */
    atomic_fetch_add_explicit(&kernels_changed, 1, memory_order_release);
    pthread_mutex_unlock(&names_lock);
}

/* After a successful enqueue: time EV when it completes (OWN: the program keeps no
 * reference to it). */
static void watch(cl_event ev, int own, int id) {
    if (!own && next.clRetainEvent(ev) != CL_SUCCESS) {
        count(id);
        return;
    }
    if (next.clSetEventCallback(ev, CL_COMPLETE, completed, (void *)(intptr_t)id) != CL_SUCCESS) {
        next.clReleaseEvent(ev);
        count(id);
    }
}

/* CALL(event) forwarded; while probed, counted under ID (for a kernel: its name's), and
 * timed when the budget allows. */
#define WATCHED(call, id_of)                                          \
    do {                                                              \
        if (!probed()) return call(event);                            \
        int64_t t0 = now_ns();                                        \
        int id = (id_of);                                             \
        flush_if_due(t0);                                             \
        if (!may_time(t0)) {                                          \
            cl_int r = call(event);                                   \
            if (r == CL_SUCCESS) count(id);                           \
            return r;                                                 \
        }                                                             \
        cl_event mine = NULL;                                         \
        cl_event *out = event ? event : &mine;                        \
        cl_int r = call(out);                                         \
        int64_t t1 = now_ns();                                        \
        if (r == CL_SUCCESS && *out) {                                \
            watch(*out, event == NULL, id);                           \
            spent(now_ns() - t1);                                     \
        }                                                             \
        return r;                                                     \
    } while (0)

static cl_int CL_API_CALL enqueue_ndrange(cl_command_queue q, cl_kernel k, cl_uint dims,
                                          const size_t *offset, const size_t *global,
                                          const size_t *local, cl_uint nwait,
                                          const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueNDRangeKernel(q, k, dims, offset, global, local, nwait, wait, ev)
    WATCHED(CALL, name_id(k));
#undef CALL
}

static cl_int CL_API_CALL enqueue_task(cl_command_queue q, cl_kernel k, cl_uint nwait,
                                       const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueTask(q, k, nwait, wait, ev)
    WATCHED(CALL, name_id(k));
#undef CALL
}

/* Blocking transfers are where many programs wait for their work: counts handed over. */
static void after_blocking(cl_bool blocking) {
    if (blocking && probed()) flush_all(now_ns());
}

static cl_int read_watched(cl_command_queue q, cl_mem b, cl_bool blocking, size_t offset,
                           size_t size, void *ptr, cl_uint nwait, const cl_event *wait,
                           cl_event *event) {
#define CALL(ev) next.clEnqueueReadBuffer(q, b, blocking, offset, size, ptr, nwait, wait, ev)
    WATCHED(CALL, READ_ID);
#undef CALL
}

static cl_int CL_API_CALL enqueue_read(cl_command_queue q, cl_mem b, cl_bool blocking,
                                       size_t offset, size_t size, void *ptr, cl_uint nwait,
                                       const cl_event *wait, cl_event *event) {
    cl_int r = read_watched(q, b, blocking, offset, size, ptr, nwait, wait, event);
    after_blocking(blocking);
    return r;
}

static cl_int write_watched(cl_command_queue q, cl_mem b, cl_bool blocking, size_t offset,
                            size_t size, const void *ptr, cl_uint nwait, const cl_event *wait,
                            cl_event *event) {
#define CALL(ev) next.clEnqueueWriteBuffer(q, b, blocking, offset, size, ptr, nwait, wait, ev)
    WATCHED(CALL, WRITE_ID);
#undef CALL
}

static cl_int CL_API_CALL enqueue_write(cl_command_queue q, cl_mem b, cl_bool blocking,
                                        size_t offset, size_t size, const void *ptr,
                                        cl_uint nwait, const cl_event *wait, cl_event *event) {
    cl_int r = write_watched(q, b, blocking, offset, size, ptr, nwait, wait, event);
    after_blocking(blocking);
    return r;
}

static cl_int CL_API_CALL enqueue_copy(cl_command_queue q, cl_mem src, cl_mem dst,
                                       size_t src_off, size_t dst_off, size_t size,
                                       cl_uint nwait, const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueCopyBuffer(q, src, dst, src_off, dst_off, size, nwait, wait, ev)
    WATCHED(CALL, COPY_ID);
#undef CALL
}

/* Where a program waits for its work: what it counted so far is handed over. */
static cl_int CL_API_CALL finish(cl_command_queue q) {
    cl_int r = next.clFinish(q);
    if (probed()) flush_all(now_ns());
    return r;
}

static cl_int CL_API_CALL wait_for_events(cl_uint n, const cl_event *events) {
    cl_int r = next.clWaitForEvents(n, events);
    if (probed()) flush_all(now_ns());
    return r;
}

/* A kernel made: its address may be one a released kernel had, cached under that one's
 * name (a release says nothing: the runtime holds references of its own). */
static cl_kernel CL_API_CALL create_kernel(cl_program p, const char *name, cl_int *err) {
    cl_kernel k = next.clCreateKernel(p, name, err);
    if (k) forget(k);
    return k;
}

static cl_int CL_API_CALL create_kernels(cl_program p, cl_uint n, cl_kernel *out, cl_uint *made) {
    cl_uint got = 0;
    cl_int r = next.clCreateKernelsInProgram(p, n, out, &got);
    if (r == CL_SUCCESS && out)
        for (cl_uint i = 0; i < got && i < n; i++) forget(out[i]);
    if (made) *made = got;
    return r;
}

static cl_kernel CL_API_CALL clone_kernel(cl_kernel from, cl_int *err) {
    cl_kernel k = next.clCloneKernel(from, err);
    if (k) forget(k);
    return k;
}

/* A fork while another thread holds names_lock would leave it held in the child, and
 * its copy of the counts not handed over would be handed over twice. */
static void before_fork(void) {
    pthread_mutex_lock(&names_lock);
    pthread_mutex_lock(&batch_lock);
}
static void after_fork_parent(void) {
    pthread_mutex_unlock(&batch_lock);
    pthread_mutex_unlock(&names_lock);
}
static void after_fork_child(void) {
    for (int id = 0; id <= MAX_NAMES; id++)
        atomic_store_explicit(&names[id].pending, 0, memory_order_relaxed);
    nbatch = 0;
    pthread_mutex_unlock(&batch_lock);
    pthread_mutex_unlock(&names_lock);
}

__attribute__((destructor)) static void at_exit(void) {
    if (probed()) flush_all(now_ns());
}

static cl_command_queue CL_API_CALL create_queue(cl_context c, cl_device_id d,
                                                 cl_command_queue_properties p, cl_int *err) {
    cl_command_queue q = next.clCreateCommandQueue(c, d, p | CL_QUEUE_PROFILING_ENABLE, err);
    if (q) forget_queue(q);
    return q;
}

static cl_command_queue CL_API_CALL create_queue_props(cl_context c, cl_device_id d,
                                                       const cl_queue_properties *props,
                                                       cl_int *err) {
    cl_queue_properties mine[MAX_QUEUE_PROPS + 3];
    size_t n = 0;
    int found = 0;
    for (; props && props[n] && n + 1 < MAX_QUEUE_PROPS; n += 2) {
        mine[n] = props[n];
        mine[n + 1] = props[n + 1];
        if (props[n] == CL_QUEUE_PROPERTIES) {
            mine[n + 1] |= CL_QUEUE_PROFILING_ENABLE;
            found = 1;
        }
    }
    cl_command_queue q;
    if (props && props[n]) {  /* longer than any real list: passed on as it came */
        q = next.clCreateCommandQueueWithProperties(c, d, props, err);
    } else {
        if (!found) {
            mine[n++] = CL_QUEUE_PROPERTIES;
            mine[n++] = CL_QUEUE_PROFILING_ENABLE;
        }
        mine[n] = 0;
        q = next.clCreateCommandQueueWithProperties(c, d, mine, err);
    }
    if (q) forget_queue(q);
    return q;
}

EXPORT cl_int CL_API_CALL clGetLayerInfo(cl_layer_info what, size_t size, void *value,
                                         size_t *size_ret) {
    static const char name[] = "adaptyst-top device kernel timing";
    const void *src;
    size_t n;
    cl_layer_api_version version = CL_LAYER_API_VERSION_100;
    switch (what) {
    case CL_LAYER_API_VERSION:
        src = &version;
        n = sizeof version;
        break;
    case CL_LAYER_NAME:
        src = name;
        n = sizeof name;
        break;
    default:
        return CL_INVALID_VALUE;
    }
    if (value) {
        if (size < n) return CL_INVALID_VALUE;
        memcpy(value, src, n);
    }
    if (size_ret) *size_ret = n;
    return CL_SUCCESS;
}

EXPORT cl_int CL_API_CALL clInitLayer(cl_uint num_entries, const cl_icd_dispatch *target,
                                      cl_uint *num_entries_ret,
                                      const cl_icd_dispatch **layer_dispatch_ret) {
    const cl_uint ours_n = sizeof ours / sizeof(void *);
    if (!target || !num_entries_ret || !layer_dispatch_ret) return CL_INVALID_VALUE;
    /* A loader with a shorter table than these headers: its entries, the rest null. */
    memset(&next, 0, sizeof next);
    memcpy(&next, target, (num_entries < ours_n ? num_entries : ours_n) * sizeof(void *));
    ours = next;
    strcpy(names[READ_ID].text, "[read]");
    strcpy(names[WRITE_ID].text, "[write]");
    strcpy(names[COPY_ID].text, "[copy]");
    strcpy(names[OTHER].text, "[other]");
    budget = budget_of(getenv("ADAPTYST_CL_BUDGET"));
    atomic_store(&refilled_at, now_ns());  /* nothing saved up before the program ran */
    atomic_store(&flushed_at, now_ns());
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    if (next.clCreateCommandQueue) ours.clCreateCommandQueue = create_queue;
    if (next.clCreateCommandQueueWithProperties)
        ours.clCreateCommandQueueWithProperties = create_queue_props;
    if (next.clGetEventProfilingInfo && next.clSetEventCallback && next.clRetainEvent &&
        next.clReleaseEvent && next.clGetKernelInfo && next.clGetEventInfo &&
        next.clGetCommandQueueInfo && next.clGetDeviceInfo) {
#define OVER(f, mine) if (next.f) ours.f = mine
        OVER(clFinish, finish);
        OVER(clWaitForEvents, wait_for_events);
        OVER(clCreateKernel, create_kernel);
        OVER(clCreateKernelsInProgram, create_kernels);
        OVER(clCloneKernel, clone_kernel);
        OVER(clEnqueueNDRangeKernel, enqueue_ndrange);
        OVER(clEnqueueTask, enqueue_task);
        OVER(clEnqueueReadBuffer, enqueue_read);
        OVER(clEnqueueWriteBuffer, enqueue_write);
        OVER(clEnqueueCopyBuffer, enqueue_copy);
#undef OVER
    }
    *num_entries_ret = num_entries < ours_n ? num_entries : ours_n;
    *layer_dispatch_ret = &ours;
    return CL_SUCCESS;
}
