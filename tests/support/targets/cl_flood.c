/* A hostile OpenCL app for the tool's layer: it loads the layer named in OPENCL_LAYERS
 * over an OpenCL "runtime" of its own whose every kernel has a new name and whose
 * events report garbage timestamps, then launches LAUNCHES kernels (argv[1]) over
 * KERNELS kernel objects (argv[2]) and prints how many launches it made.
 *
 * The layer must count every launch, keep its names bounded (the rest "[other]"), and
 * hand nothing out of range to the probe; the session, costs only this process. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_layer.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static cl_int CL_API_CALL kernel_info(cl_kernel k, cl_kernel_info what, size_t size, void *value,
                                      size_t *size_ret) {
    char name[300];
    if (what == CL_KERNEL_REFERENCE_COUNT) {
        if (value) *(cl_uint *)value = 2;
        return CL_SUCCESS;
    }
    /* every few kernels a name past any buffer, the others short and distinct */
    if ((uintptr_t)k % 7 == 0) {
        memset(name, 'x', sizeof name - 1);
        name[sizeof name - 1] = 0;
    } else {
        snprintf(name, sizeof name, "k%lu", (unsigned long)(uintptr_t)k);
    }
    size_t n = strlen(name) + 1;
    if (size_ret) *size_ret = n;
    if (value) {
        if (size < n) return CL_INVALID_VALUE;
        memcpy(value, name, n);
    }
    return CL_SUCCESS;
}

static cl_int CL_API_CALL enqueue(cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o,
                                  const size_t *g, const size_t *l, cl_uint nw, const cl_event *w,
                                  cl_event *ev) {
    (void)q, (void)k, (void)d, (void)o, (void)g, (void)l, (void)nw, (void)w;
    if (ev) *ev = (cl_event)(uintptr_t)(0x1000 + (next_random() & 0xffff) * 16);
    return CL_SUCCESS;
}

static cl_int CL_API_CALL event_info(cl_event e, cl_profiling_info what, size_t size, void *value,
                                     size_t *size_ret) {
    (void)e, (void)what, (void)size_ret;
    if (size >= sizeof(cl_ulong) && value) *(cl_ulong *)value = next_random();
    return CL_SUCCESS;
}

static cl_int CL_API_CALL set_callback(cl_event e, cl_int status,
                                       void(CL_CALLBACK *fn)(cl_event, cl_int, void *),
                                       void *user) {
    fn(e, next_random() % 3 ? status : -5, user);  /* at once, now and then failed */
    return CL_SUCCESS;
}

/* the queue, device and device type of an event: random, or refused */
static cl_int CL_API_CALL any_info(void *o, cl_uint what, size_t size, void *value, size_t *ret) {
    (void)o, (void)what, (void)ret;
    if (next_random() % 4 == 0) return CL_INVALID_VALUE;
    if (value && size >= sizeof(uint64_t)) *(uint64_t *)value = next_random();
    return CL_SUCCESS;
}

static cl_int CL_API_CALL ok_event(cl_event e) { (void)e; return CL_SUCCESS; }
static cl_int CL_API_CALL ok_queue(cl_command_queue q) { (void)q; return CL_SUCCESS; }

int main(int argc, char **argv) {
    long launches = argc > 1 ? atol(argv[1]) : 100000, kernels = argc > 2 ? atol(argv[2]) : 5000;
    const char *layer = getenv("OPENCL_LAYERS");
    void *h = layer ? dlopen(layer, RTLD_NOW) : NULL;
    if (!h) {
        fprintf(stderr, "no layer: %s\n", dlerror());
        return 2;
    }
    pfn_clInitLayer init = (pfn_clInitLayer)dlsym(h, "clInitLayer");
    static struct _cl_icd_dispatch fake;
    fake.clGetKernelInfo = kernel_info;
    fake.clEnqueueNDRangeKernel = enqueue;
    fake.clGetEventProfilingInfo = event_info;
    fake.clSetEventCallback = set_callback;
    fake.clRetainEvent = ok_event;
    fake.clReleaseEvent = ok_event;
    fake.clFinish = ok_queue;
    fake.clGetEventInfo = (cl_api_clGetEventInfo)any_info;
    fake.clGetCommandQueueInfo = (cl_api_clGetCommandQueueInfo)any_info;
    fake.clGetDeviceInfo = (cl_api_clGetDeviceInfo)any_info;
    cl_uint n = 0;
    const cl_icd_dispatch *layered = NULL;
    if (!init || init(sizeof fake / sizeof(void *), &fake, &n, &layered) != CL_SUCCESS) return 3;
    for (long i = 0; i < launches; i++) {
        cl_kernel k = (cl_kernel)(uintptr_t)(0x10000 + (i % kernels) * 64);
        cl_event ev;
        layered->clEnqueueNDRangeKernel(NULL, k, 1, NULL, NULL, NULL, 0, NULL,
                                        i % 2 ? &ev : NULL);
    }
    layered->clFinish(NULL);
    printf("%ld\n", launches);
    return 0;
}
