/* A shared library whose time goes to two static functions (no exported name: stripped,
 * only the unwind table knows them), and the program that drives it. libhot's hot_run()
 * calls hot_alpha (3 units) and hot_beta (1 unit); the program times each call's CPU and
 * counts them, and prints what it measured as JSON when its seconds are up.
 * Built twice: -DLIBHOT for the library, without for the program. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef LIBHOT
#define SPIN(n) do { volatile double x = 0; for (long i = 0; i < (n); i++) x += i * 0.5; } while (0)
static long alpha_calls, beta_calls;
__attribute__((noinline)) static void hot_alpha(long n) { SPIN(n); alpha_calls++; __asm__ volatile(""); }
__attribute__((noinline)) static void hot_beta(long n) { SPIN(n); beta_calls++; __asm__ volatile(""); }
void hot_run(long n, int which) {
    if (which) hot_alpha(n); else hot_beta(n);
    __asm__ volatile("");
}
void hot_counts(long *a, long *b) { *a = alpha_calls; *b = beta_calls; }
#else
void hot_run(long n, int which);
void hot_counts(long *a, long *b);
static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    double end = now(CLOCK_MONOTONIC) + (argc > 1 ? atof(argv[1]) : 3.0);
    double a = 0, b = 0;
    unsigned long lcg = 12345;
    while (now(CLOCK_MONOTONIC) < end) {
        /* Uneven rounds, so that samples do not fall at the same points of each. */
        lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
        long unit = 20000 + (long)((lcg >> 33) % 40000);
        double c0 = now(CLOCK_THREAD_CPUTIME_ID);
        hot_run(3 * unit, 1);
        double c1 = now(CLOCK_THREAD_CPUTIME_ID);
        hot_run(unit, 0);
        double c2 = now(CLOCK_THREAD_CPUTIME_ID);
        a += c1 - c0;
        b += c2 - c1;
    }
    long na, nb;
    hot_counts(&na, &nb);
    printf("{\"alpha_s\": %f, \"beta_s\": %f, \"alpha_calls\": %ld, \"beta_calls\": %ld}\n",
           a, b, na, nb);
    return 0;
}
#endif
