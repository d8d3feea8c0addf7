/* One thread that computes in two leaves and blocks only in waiter() (usleep), built
 * without frame pointers. Beside a busy loop on its core it is preempted in the leaves
 * (runnable) and blocks in waiter, switch-outs alternating within a sampling period. At
 * exit it prints the wall time it spent inside waiter, as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define SPIN(n) do { volatile double x = 0; for (long i = 0; i < (n); i++) x += i * 0.5; } while (0)
__attribute__((noinline)) void leaf_x(long n) { SPIN(n); }
__attribute__((noinline)) void leaf_y(long n) { SPIN(n); }
__attribute__((noinline)) void outer_a(long n) { leaf_x(n); __asm__ volatile(""); }
__attribute__((noinline)) void outer_b(long n) { leaf_y(n); __asm__ volatile(""); }

static double waited;
__attribute__((noinline)) void waiter(void) {
    double t0 = now();
    usleep(1000);
    waited += now() - t0;
    __asm__ volatile("");
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 3.0);
    long n = argc > 2 ? atol(argv[2]) : 400000;  /* a leaf's work: ~1 ms here */
    while (now() < end) {
        outer_a(n);
        waiter();
        outer_b(n);
        waiter();
    }
    printf("{\"waited\": %.6f}\n", waited);
    return 0;
}
