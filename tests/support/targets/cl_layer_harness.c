/* The OpenCL layer's own logic, checked from inside (its source included): the budget as
 * the monitor writes it, whatever the program's locale; a kernel made at an address a
 * released one had is filed under its own name; names longer than a key stay apart; a
 * fork leaves the child nothing to hand over twice. Prints one line per failed check, then "ok" or "failed". */
#include <locale.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "opencl_layer.c"

static int failed;
#define CHECK(cond)                                                  \
    do {                                                             \
        if (!(cond)) {                                               \
            printf("failed: %s (line %d)\n", #cond, __LINE__);      \
            failed = 1;                                              \
        }                                                            \
    } while (0)

static const char *fake_name = "first";
static cl_kernel fake_kernel = (cl_kernel)(uintptr_t)0x5000;

static cl_int CL_API_CALL fake_info(cl_kernel k, cl_kernel_info what, size_t size, void *value,
                                    size_t *ret) {
    (void)k, (void)what;
    size_t n = strlen(fake_name) + 1;
    if (ret) *ret = n;
    if (value) {
        if (size < n) return CL_INVALID_VALUE;
        memcpy(value, fake_name, n);
    }
    return CL_SUCCESS;
}

static cl_kernel CL_API_CALL fake_create(cl_program p, const char *name, cl_int *err) {
    (void)p, (void)err;
    fake_name = name;
    return fake_kernel;  /* always the same address: the last kernel's, released */
}

int main(void) {
    setlocale(LC_ALL, "");  /* the program's locale: a comma for a decimal point, maybe */
    CHECK(budget_of("0.020000000") == 0.02);
    CHECK(budget_of("1.000000000") == 1.0);
    CHECK(budget_of("0.000000000") == 0.0);
    CHECK(budget_of(NULL) == 1.0 && budget_of("") == 1.0);
    CHECK(budget_of("0,02") == 1.0 && budget_of("-1") == 1.0 && budget_of("nan") == 1.0);
    CHECK(budget_of("1e-05") == 1.0 && budget_of("0.1.2") == 1.0);

    next.clGetKernelInfo = fake_info;
    next.clCreateKernel = fake_create;
    int first = name_id(fake_kernel);
    CHECK(!strcmp(names[first].text, "first"));
    cl_kernel again = create_kernel(NULL, "second", NULL);
    int second = name_id(again);
    CHECK(again == fake_kernel && second != first && !strcmp(names[second].text, "second"));
    CHECK(name_id(fake_kernel) == second);  /* cached again, under its own name */

    /* Two names alike in their first 31 bytes (the probes' key): two rows, each its
     * first 22 bytes, '~' and the FNV-1a hash of the whole (device_layer.row_name). */
    static const char long_a[] = "vectorized_elementwise_kernel_fill_float4";
    static const char long_b[] = "vectorized_elementwise_kernel_abs_float4";
    int a = name_id(create_kernel(NULL, long_a, NULL));
    int b = name_id(create_kernel(NULL, long_b, NULL));
    CHECK(a != b && strlen(names[a].text) == 31 && !strncmp(names[a].text, long_a, 22));
    CHECK(names[a].text[22] == '~' && strcmp(names[a].text, names[b].text));
    printf("hashed %s %s\n", long_a, names[a].text);

    atomic_store(&names[first].pending, 5);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    pid_t child = fork();
    if (child == 0) {
        /* the lock is free here, and nothing the parent counted is the child's */
        int free_ = pthread_mutex_trylock(&names_lock) == 0;
        _exit(free_ && atomic_load(&names[first].pending) == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(atomic_load(&names[first].pending) == 5);

    puts(failed ? "failed" : "ok");
    return failed;
}
