/* A target whose time is split between functions by construction, built without frame
 * pointers: main calls outer_a (3 units of work in leaf), outer_b (1 unit in leaf) and
 * heavy (2 units of its own), each timing its own CPU; a second thread sleeps in
 * sleeper_wait and sums what it slept. At exit it prints what it measured, as JSON. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define SPIN(n) do { volatile double x = 0; for (long i = 0; i < (n); i++) x += i * 0.5; } while (0)
/* The empty asm after each call keeps it a call (no tail jump): the caller stays on the stack. */
__attribute__((noinline)) void leaf(long n) { SPIN(n); }
__attribute__((noinline)) void outer_a(long n) { leaf(n); __asm__ volatile(""); }
__attribute__((noinline)) void outer_b(long n) { leaf(n); __asm__ volatile(""); }
__attribute__((noinline)) void heavy(long n) { SPIN(n); __asm__ volatile(""); }

static double slept;
__attribute__((noinline)) void sleeper_wait(void) {
    struct timespec d = {0, 3000000};
    double t0 = now(CLOCK_MONOTONIC);
    nanosleep(&d, NULL);
    slept += now(CLOCK_MONOTONIC) - t0;
    __asm__ volatile("");
}

static void *sleeper(void *end) {
    while (now(CLOCK_MONOTONIC) < *(double *)end)
        sleeper_wait();
    return NULL;
}

int main(int argc, char **argv) {
    double end = now(CLOCK_MONOTONIC) + (argc > 1 ? atof(argv[1]) : 3.0);
    long unit;
    pthread_t t;
    pthread_create(&t, NULL, sleeper, &end);
    double a = 0, b = 0, h = 0, started = now(CLOCK_MONOTONIC);
    long rounds = 0;
    unsigned long lcg = 12345;
    for (; now(CLOCK_MONOTONIC) < end; rounds++) {
        /* Rounds of uneven length (0.5..1.5 units): at an even length near a multiple of
         * the sampling period, samples fall at the same few points of every round (seen:
         * 496 rounds/s under 497 Hz put 8 points of outer_a's share on heavy). */
        lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
        unit = 50000 + (long)((lcg >> 33) % 100000);
        double c0 = now(CLOCK_THREAD_CPUTIME_ID);
        outer_a(3 * unit);
        double c1 = now(CLOCK_THREAD_CPUTIME_ID);
        outer_b(unit);
        double c2 = now(CLOCK_THREAD_CPUTIME_ID);
        heavy(2 * unit);
        double c3 = now(CLOCK_THREAD_CPUTIME_ID);
        a += c1 - c0;
        b += c2 - c1;
        h += c3 - c2;
    }
    double wall = now(CLOCK_MONOTONIC) - started;
    pthread_join(t, NULL);
    printf("{\"outer_a\": %.6f, \"outer_b\": %.6f, \"heavy\": %.6f, \"slept\": %.6f, "
           "\"rounds_per_s\": %.3f}\n", a, b, h, slept, rounds / wall);
    return 0;
}
