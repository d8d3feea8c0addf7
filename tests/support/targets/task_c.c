/* A C application using adaptyst_task.h.
 *   task_c run     waits for a line on stdin, then runs 30 spmv (200 us) and 20 gemm
 *                  (500 us) tasks, prints each kind's median task as it measured it
 *                  ("spmv NS gemm NS": the truth on a loaded node), and exits
 *   task_c keys    reads "task device size feature" lines, prints each key */
#include "adaptyst_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Spins US microseconds; how long it took (ns). */
static long spin_us(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
    return (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    char line[256];
    adaptyst_task t;
    if (argc > 1 && !strcmp(argv[1], "keys")) {
        char task[64], device[64];
        long long size;
        double feature;
        while (scanf("%63s %63s %lld %lf", task, device, &size, &feature) == 4) {
            adaptyst_task_begin(&t, task, device, size, feature);
            adaptyst_task_end(&t);
            printf("%s\n", t.key);
        }
        return 0;
    }
    if (!fgets(line, sizeof line, stdin)) return 1;
    long spmv[30], gemm[20];
    for (int i = 0; i < 30; i++) {
        adaptyst_task_begin(&t, "spmv", "cpu", 3000000, 0.001);
        spmv[i] = spin_us(200);
        adaptyst_task_end(&t);
    }
    for (int i = 0; i < 20; i++) {
        adaptyst_task_begin(&t, "gemm", "opencl:0", 65536, ADAPTYST_NO_FEATURE);
        gemm[i] = spin_us(500);
        adaptyst_task_end(&t);
    }
    qsort(spmv, 30, sizeof(long), cmp_long);
    qsort(gemm, 20, sizeof(long), cmp_long);
    printf("spmv %ld gemm %ld\n", spmv[14], gemm[9]);
    return 0;
}
