/* A C application using adaptyst_task.h.
 *   task_c run     waits for a line on stdin, then runs 30 spmv (200 us) and 20 gemm
 *                  (500 us) tasks, and exits
 *   task_c keys    reads "task device size feature" lines, prints each key */
#include "adaptyst_task.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void spin_us(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
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
    for (int i = 0; i < 30; i++) {
        adaptyst_task_begin(&t, "spmv", "cpu", 3000000, 0.001);
        spin_us(200);
        adaptyst_task_end(&t);
    }
    for (int i = 0; i < 20; i++) {
        adaptyst_task_begin(&t, "gemm", "opencl:0", 65536, ADAPTYST_NO_FEATURE);
        spin_us(500);
        adaptyst_task_end(&t);
    }
    return 0;
}
