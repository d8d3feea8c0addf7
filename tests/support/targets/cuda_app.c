/* A CUDA program on the fake driver and CUPTI (cupti_fake.c): it "launches" kernels,
 * copies and memsets with known device times, in an irregular order, and writes what it
 * launched to --out as JSON: launches and device ns by full name (the tool's rows must
 * equal these), the buffers the tool lent CUPTI's fake, the seconds from the first
 * launch to the last record read (a flush), and the CPU time of all its threads.
 *
 *   cuda_app --out FILE [--launches N] [--seed S] [--names K] [--invalid M]
 *            [--graph G] [--hoard H] [--hold SECONDS] [--pace] [--reuse N]
 *            [--foreign K] [--fork] [--no-flush]
 *
 * --names K: K more kernels, each named anew (a flood of names); --invalid M: M
 * launches CUPTI could not time (start = end = 0); --graph G: G launches of one kernel
 * from a CUDA graph; --hoard H: CUPTI asks for H buffers and keeps them while 100
 * launches of _Z7starvedv find none (dropped), then hands them back; --hold: sleep
 * that long after cuInit; --pace: 1 ms of sleep every 100 launches, so that the fake's
 * flusher hands buffers back while launches go on; --reuse N: N launches of a kernel,
 * then N of another alike in its first 40 bytes whose name CUPTI keeps at the same
 * address; --foreign K: K records in a buffer another CUPTI client lent; --fork: a
 * child that launches and exits (its exit handlers run); --no-flush: no flush of its
 * own at the end (the tool's, at exit, is the last). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int fake_cuda_init(void);
void fake_kernel(const char *name, uint64_t start, uint64_t end, uint32_t graph);
void fake_memcpy(uint8_t kind, uint64_t bytes, uint64_t start, uint64_t end);
void fake_memset(uint64_t bytes, uint64_t start, uint64_t end);
void fake_stats(long *held_max, long *asked, size_t *pool_limit);
void fake_stop(void);
long fake_hoard(long n);
void fake_foreign(long k, const char *name);
void fake_release(void);
int cuptiActivityFlushAll(unsigned flag); /* CUPTI's; an enum result */

#define MAX_SEEN 8192
static struct {
    const char *name;
    uint64_t n, ns;
} seen[MAX_SEEN];
static int nseen;
static uint64_t rng = 88172645463325252ull, clock_ns = 1000000000ull;

static uint64_t next_rand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void note(const char *name, uint64_t ns) {
    int i = 0;
    while (i < nseen && strcmp(seen[i].name, name)) i++;
    if (i == nseen && nseen < MAX_SEEN) seen[nseen++].name = name;
    if (i < MAX_SEEN) seen[i].n++, seen[i].ns += ns;
}

/* A command of ~1-50 us on the fake device's clock. */
static uint64_t run_for(uint64_t *start) {
    uint64_t ns = 1000 + next_rand() % 49000;
    *start = clock_ns;
    clock_ns += ns + 500;
    return ns;
}

static const char *const kernels[] = {
    "_Z9vectorAddPKfS0_Pfi",
    "_Z6reducePfS_i",
    /* Two names alike in their first 31 bytes: rows of their own all the same. */
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AbsFunctorIfEENS_6detail5ArrayIPcLi2EEEEEviT0_T1_",
};

int main(int argc, char **argv) {
    const char *out = NULL;
    long launches = 600, names = 0, invalid = 0, graph = 0, hoard = 0, hold = 0, reuse = 0;
    long foreign = 0;
    int pace = 0, forks = 0, flush = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--pace")) pace = 1;
        else if (!strcmp(a, "--fork")) forks = 1;
        else if (!strcmp(a, "--no-flush")) flush = 0;
        else if (v && !strcmp(a, "--reuse")) reuse = atol(v), i++;
        else if (v && !strcmp(a, "--foreign")) foreign = atol(v), i++;
        else if (v && !strcmp(a, "--out")) out = v, i++;
        else if (v && !strcmp(a, "--launches")) launches = atol(v), i++;
        else if (v && !strcmp(a, "--seed")) rng ^= (uint64_t)atol(v) * 0x9E3779B97F4A7C15ull, i++;
        else if (v && !strcmp(a, "--names")) names = atol(v), i++;
        else if (v && !strcmp(a, "--invalid")) invalid = atol(v), i++;
        else if (v && !strcmp(a, "--graph")) graph = atol(v), i++;
        else if (v && !strcmp(a, "--hoard")) hoard = atol(v), i++;
        else if (v && !strcmp(a, "--hold")) hold = atol(v), i++;
        else {
            fprintf(stderr, "cuda_app: bad argument %s\n", a);
            return 2;
        }
    }
    if (!out) return 2;
    int loaded = fake_cuda_init();
    if (hold) nanosleep(&(struct timespec){hold, 0}, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t start, ns;
    for (long i = 0; i < launches; i++) {
        const char *k = kernels[next_rand() % (sizeof kernels / sizeof *kernels)];
        ns = run_for(&start);
        fake_kernel(k, start, start + ns, 0);
        note(k, ns);
        if (i % 50 == 0) {
            ns = run_for(&start);
            fake_memcpy(1, 4096, start, start + ns);  /* CUPTI_ACTIVITY_MEMCPY_KIND_HTOD */
            note("[HtoD]", ns);
            ns = run_for(&start);
            fake_memcpy(2, 4096, start, start + ns);  /* DTOH */
            note("[DtoH]", ns);
            ns = run_for(&start);
            fake_memset(4096, start, start + ns);
            note("[memset]", ns);
        }
        if (pace && i % 100 == 99) nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    char (*flood)[40] = names ? calloc((size_t)names, 40) : NULL;
    for (long i = 0; flood && i < names; i++) {
        snprintf(flood[i], 40, "_Z6flood%ldv", i);
        ns = run_for(&start);
        fake_kernel(flood[i], start, start + ns, 0);
    }
    for (long i = 0; i < invalid; i++) {
        fake_kernel("_Z7noclockv", 0, 0, 0);
        note("_Z7noclockv", 0);
    }
    for (long i = 0; i < graph; i++) {
        ns = run_for(&start);
        fake_kernel("_Z10graph_nodePf", start, start + ns, 7);
        note("_Z10graph_nodePf", ns);
    }
    static char shared[160];  /* one address, two names: as CUPTI's after a module unload */
    static const char *const alike[] = {
        "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock3MmaA0EEEEEvNT_6ParamsE",
        "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock3MmaB1EEEEEvNT_6ParamsE"};
    for (int which = 0; reuse && which < 2; which++) {
        strcpy(shared, alike[which]);
        for (long i = 0; i < reuse; i++) {
            ns = run_for(&start);
            fake_kernel(shared, start, start + ns, 0);
            note(alike[which], ns);
        }
        cuptiActivityFlushAll(1); /* read while the name is still this one */
    }
    if (foreign) {
        fake_foreign(foreign, "_Z7foreignv");
        for (long i = 0; i < foreign; i++) note("_Z7foreignv", 2000);
    }
    if (forks) {
        pid_t child = fork();
        if (child == 0) {
            for (int i = 0; i < 10; i++) fake_kernel("_Z5childv", 1, 2, 0);
            exit(0); /* exit handlers run: the tool's must not wait for CUPTI here */
        }
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            return 3;
    }
    long lent = 0;
    if (hoard) {
        lent = fake_hoard(hoard);
        for (int i = 0; i < 100; i++) {
            ns = run_for(&start);
            fake_kernel("_Z7starvedv", start, start + ns, 0);
        }
        fake_release();
    }
    fake_stop();
    if (flush) cuptiActivityFlushAll(1); /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: all read */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* every thread's: CUPTI's (the fake's flusher) too */
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    long held_max = 0, asked = 0;
    size_t pool_limit = 0;
    fake_stats(&held_max, &asked, &pool_limit);
    FILE *f = fopen(out, "w");
    if (!f) return 1;
    fprintf(f, "{\"loaded\": %d, \"held_max\": %ld, \"asked\": %ld, \"pool_limit\": %zu,",
            loaded, held_max, asked, pool_limit);
    fprintf(f, " \"lent\": %ld,", lent);
    fprintf(f, " \"seconds\": %.9f, \"cpu_seconds\": %.6f, \"flood\": %ld, \"launches\": {",
            seconds, cpu, names);
    for (int i = 0; i < nseen; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", seen[i].name, (unsigned long long)seen[i].n);
    fprintf(f, "}, \"device_ns\": {");
    for (int i = 0; i < nseen; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", seen[i].name, (unsigned long long)seen[i].ns);
    fprintf(f, "}}\n");
    return fclose(f) ? 1 : 0;
}
