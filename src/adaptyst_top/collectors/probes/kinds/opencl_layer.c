/* The OpenCL layer adaptyst-top puts under a command it launches with an `opencl:` probe
 * (OPENCL_LAYERS, read by the Khronos loader and by ocl-icd 2.3 and newer): every queue
 * the program creates has profiling enabled, and each kernel launch and buffer transfer,
 * while the probe is attached (its USDT semaphore is non-zero), gets an event callback
 * that reads the device's own timestamps and fires one USDT site:
 *
 *   adaptyst_cl:kernel(name, device_ns, queued_ns, enqueue_ns)
 *
 * name: the kernel's function name, or "[read]", "[write]", "[copy]" for transfers;
 * device_ns: END - START as the device timed it; queued_ns: START - QUEUED;
 * enqueue_ns: what the enqueue call itself cost the host thread. A launch whose
 * timestamps cannot be read fires with device_ns = ~0: counted, not timed.
 *
 * Nothing waits: the callback runs on the runtime's thread when the command completes.
 * Each launch in flight holds one small record (freed in its callback) and one event
 * reference, so memory follows what the program has queued, never what it ran. With no
 * probe attached an enqueue costs one load of the semaphore. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_layer.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define _SDT_HAS_SEMAPHORES 1
#include "adaptyst_sdt.h"

#define EXPORT __attribute__((visibility("default")))
#define NAME_MAX_LEN 128
#define UNTIMED UINT64_MAX
#define MAX_QUEUE_PROPS 64

/* Raised by the kernel (uprobe ref_ctr_offset) while a probe is attached to the site. */
__extension__ unsigned short adaptyst_cl_kernel_semaphore
    __attribute__((unused)) __attribute__((section(".probes")));

static struct _cl_icd_dispatch next;  /* the layer below: the loader's dispatch */
static struct _cl_icd_dispatch ours;

struct launch {
    uint64_t enqueue_ns;
    char name[NAME_MAX_LEN];
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int profiling(cl_event ev, cl_profiling_info what, cl_ulong *out) {
    return next.clGetEventProfilingInfo(ev, what, sizeof *out, out, NULL) == CL_SUCCESS;
}

static void CL_CALLBACK completed(cl_event ev, cl_int status, void *user) {
    struct launch *l = user;
    cl_ulong queued = 0, start = 0, end = 0;
    uint64_t device = UNTIMED, waited = 0;
    if (status == CL_COMPLETE && profiling(ev, CL_PROFILING_COMMAND_QUEUED, &queued) &&
        profiling(ev, CL_PROFILING_COMMAND_START, &start) &&
        profiling(ev, CL_PROFILING_COMMAND_END, &end) && end >= start) {
        device = end - start;
        waited = start >= queued ? start - queued : 0;
    }
    DTRACE_PROBE4(adaptyst_cl, kernel, l->name, device, waited, l->enqueue_ns);
    next.clReleaseEvent(ev);  /* ours, or the reference taken for this callback */
    free(l);
}

static void kernel_name(cl_kernel k, char *out) {
    size_t n = 0;
    strcpy(out, "[unnamed]");
    if (next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, 0, NULL, &n) != CL_SUCCESS || n == 0)
        return;
    if (n <= NAME_MAX_LEN) {
        if (next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, n, out, NULL) != CL_SUCCESS)
            strcpy(out, "[unnamed]");
        out[NAME_MAX_LEN - 1] = 0;
        return;
    }
    char *whole = malloc(n);
    if (whole && next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, n, whole, NULL) == CL_SUCCESS) {
        memcpy(out, whole, NAME_MAX_LEN - 1);
        out[NAME_MAX_LEN - 1] = 0;
    }
    free(whole);
}

/* After a successful enqueue: time EV when it completes (OWN: the program gets no
 * reference to it). Called only while the probe is attached. */
static void watch(cl_event ev, int own, uint64_t enqueue_ns, cl_kernel k, const char *what) {
    struct launch *l = malloc(sizeof *l);
    if (!l) {
        if (own) next.clReleaseEvent(ev);
        return;
    }
    l->enqueue_ns = enqueue_ns;
    if (k)
        kernel_name(k, l->name);
    else
        strcpy(l->name, what);
    if (!own && next.clRetainEvent(ev) != CL_SUCCESS) {
        free(l);
        return;
    }
    if (next.clSetEventCallback(ev, CL_COMPLETE, completed, l) != CL_SUCCESS) {
        next.clReleaseEvent(ev);
        free(l);
    }
}

#define WATCHED(call, k, what)                                   \
    do {                                                         \
        if (!adaptyst_cl_kernel_semaphore) return call(event);   \
        cl_event mine = NULL;                                    \
        cl_event *out = event ? event : &mine;                   \
        uint64_t t0 = now_ns();                                  \
        cl_int r = call(out);                                    \
        uint64_t t1 = now_ns();                                  \
        if (r == CL_SUCCESS && *out)                             \
            watch(*out, event == NULL, t1 - t0, k, what);        \
        return r;                                                \
    } while (0)

static cl_int CL_API_CALL enqueue_ndrange(cl_command_queue q, cl_kernel k, cl_uint dims,
                                          const size_t *offset, const size_t *global,
                                          const size_t *local, cl_uint nwait,
                                          const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueNDRangeKernel(q, k, dims, offset, global, local, nwait, wait, ev)
    WATCHED(CALL, k, NULL);
#undef CALL
}

static cl_int CL_API_CALL enqueue_task(cl_command_queue q, cl_kernel k, cl_uint nwait,
                                       const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueTask(q, k, nwait, wait, ev)
    WATCHED(CALL, k, NULL);
#undef CALL
}

static cl_int CL_API_CALL enqueue_read(cl_command_queue q, cl_mem b, cl_bool blocking,
                                       size_t offset, size_t size, void *ptr, cl_uint nwait,
                                       const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueReadBuffer(q, b, blocking, offset, size, ptr, nwait, wait, ev)
    WATCHED(CALL, NULL, "[read]");
#undef CALL
}

static cl_int CL_API_CALL enqueue_write(cl_command_queue q, cl_mem b, cl_bool blocking,
                                        size_t offset, size_t size, const void *ptr,
                                        cl_uint nwait, const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueWriteBuffer(q, b, blocking, offset, size, ptr, nwait, wait, ev)
    WATCHED(CALL, NULL, "[write]");
#undef CALL
}

static cl_int CL_API_CALL enqueue_copy(cl_command_queue q, cl_mem src, cl_mem dst,
                                       size_t src_off, size_t dst_off, size_t size,
                                       cl_uint nwait, const cl_event *wait, cl_event *event) {
#define CALL(ev) next.clEnqueueCopyBuffer(q, src, dst, src_off, dst_off, size, nwait, wait, ev)
    WATCHED(CALL, NULL, "[copy]");
#undef CALL
}

static cl_command_queue CL_API_CALL create_queue(cl_context c, cl_device_id d,
                                                 cl_command_queue_properties p, cl_int *err) {
    return next.clCreateCommandQueue(c, d, p | CL_QUEUE_PROFILING_ENABLE, err);
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
    if (props && props[n])  /* longer than any real list: passed on as it came */
        return next.clCreateCommandQueueWithProperties(c, d, props, err);
    if (!found) {
        mine[n++] = CL_QUEUE_PROPERTIES;
        mine[n++] = CL_QUEUE_PROFILING_ENABLE;
    }
    mine[n] = 0;
    return next.clCreateCommandQueueWithProperties(c, d, mine, err);
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
    if (next.clCreateCommandQueue) ours.clCreateCommandQueue = create_queue;
    if (next.clCreateCommandQueueWithProperties)
        ours.clCreateCommandQueueWithProperties = create_queue_props;
    if (next.clGetEventProfilingInfo && next.clSetEventCallback && next.clRetainEvent &&
        next.clReleaseEvent && next.clGetKernelInfo) {
#define OVER(f, mine) if (next.f) ours.f = mine
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
