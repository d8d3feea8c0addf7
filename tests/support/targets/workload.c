/* Test target: functions with known durations and USDT probes, driven by stdin so
 * that a test can attach first and then ask for an exact number of calls.
 *   held N US      N calls of held_fn(US) (busy-waits US microseconds)
 *   heldss N US    N calls of held_ss(US): held_fn behind a single-stepped lea
 *   heldnop N US   N calls of held_nop(US): held_fn behind a 5-byte nop
 *   napped N US    N calls of napped_fn(US) (sleeps US microseconds: off the CPU)
 *   heldnap N US   N times: held_fn(US), then napped_fn(US) (equal latency, side by side)
 *   fast N         N calls of fast_fn (tiny, -O0 style: starts with push %rbp)
 *   ppid N         N calls of libc's getppid (for probes on every libc function)
 *   other N        N calls of other_fn (like fast_fn)
 *   leaf N         N calls of leaf_fn (-O2 leaf: starts with lea, single-stepped)
 *   task NAME N US N pairs task_begin(NAME, US)/task_end(NAME) around held_fn(US)
 *   nested N US    N times: outer begin, inner begin, held_fn(US), inner end, outer end
 *   tick N         N hits of the count-only USDT probe adaptyst_test:tick
 *   forever US     task_begin/held_fn(US)/task_end, 100 fast_fn, a tick, 1 ms sleep; forever
 *   sleep MS       sleeps MS milliseconds
 *   await PATH     waits until PATH exists
 *   spawn K MS N   K child processes, each: sleep MS, N calls of fast_fn; waits for them
 *   spawnexec MS N a child that execs this program ("sleep MS fast N"); waits for it
 *   threads K N F  K threads at once, each N calls of F (fast or nop5_entry); waits for them
 *   cpu            prints "cpu NS": this process's CPU time so far (the truth beside a probe)
 *   took           prints "took P50 MIN MEAN": held_fn's own durations (ns, its clock from its
 *                  entry to its return) since the last "took": the truth a latency is
 *                  held to on a loaded node, where a call preempted past its end runs long
 *   exit CODE
 * Each command answers "ok" once done. Commands come from stdin, or from the
 * arguments when there are any ("workload held 10 100 exit 3"). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/sdt.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <pthread.h>

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

#define MAX_TOOK 65536
static long took_ns[MAX_TOOK];
static long ntook;

__attribute__((noinline, optimize("O0"))) void held_fn(long us) {
    long start = now_ns(), end = start + us * 1000, t;
    while ((t = now_ns()) < end) {}
    if (ntook < MAX_TOOK) took_ns[ntook++] = t - start;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline, optimize("O0"))) void napped_fn(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&t, &t) != 0) {}
}

__attribute__((noinline, optimize("O0"))) long fast_fn(long x) { return x + 1; }

__attribute__((noinline, optimize("O0"))) long other_fn(long x) { return x * 2; }

/* Negative returns, as a failing read() gives: keyed by @retval, a number, never read
 * as a pointer. */
__attribute__((noinline, optimize("O0"))) long negate(long x) { return -x; }

/* held_fn behind an entry instruction that must be single-stepped, like an -O2 function. */
__asm__(".text\n.globl held_ss\n.type held_ss,@function\n"
        "held_ss:\n lea 0(%rdi),%rdi\n jmp held_fn\n.size held_ss,.-held_ss\n");
void held_ss(long us);
/* held_fn behind a 5-byte nop (as -mfentry -mnop-mcount puts first), aligned so that it
 * lies in one page: the kernel turns a uprobe there into a call. */
__asm__(".text\n.p2align 4\n.globl held_nop\n.type held_nop,@function\n"
        "held_nop:\n .byte 0x0f,0x1f,0x44,0x00,0x00\n jmp held_fn\n.size held_nop,.-held_nop\n");
void held_nop(long us);

/* -O2 leaf: its first instruction is a lea, which a uprobe must single-step. */
__attribute__((noinline)) long leaf_fn(long x) { return x * 3 + 1; }

/* As gcc -pg -mfentry -mnop-mcount builds every function: a 5-byte nop first, which the
 * kernel turns into a call once probed (where it optimizes uprobes). */
__asm__(".text\n.p2align 4\n.globl nop5_entry\n.type nop5_entry,@function\n"
        "nop5_entry:\n .byte 0x0f,0x1f,0x44,0x00,0x00\n lea 1(%rdi),%rax\n ret\n"
        ".size nop5_entry,.-nop5_entry\n");
long nop5_entry(long x);

struct calls { long (*fn)(long); long n; pthread_barrier_t *start; };

static void *call_n(void *arg) {
    struct calls *c = arg;
    long (*volatile fn)(long) = c->fn;
    pthread_barrier_wait(c->start);
    for (long i = 0; i < c->n; i++) fn(i);
    return NULL;
}

/* K threads, released together, each N calls of FN. */
static int threads(long k, long n, long (*fn)(long)) {
    pthread_t t[64];
    pthread_barrier_t start;
    struct calls c = {fn, n, &start};
    if (k < 1 || k > 64) return -1;
    pthread_barrier_init(&start, NULL, (unsigned)k);
    for (long i = 0; i < k; i++) pthread_create(&t[i], NULL, call_n, &c);
    for (long i = 0; i < k; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    return 0;
}

int main(int argc, char **argv) {
    char cmd[32], name[64], script[4096] = "", path[4096];
    long n, us, k;
    FILE *in = stdin;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            strncat(script, argv[i], sizeof(script) - strlen(script) - 2);
            strcat(script, " ");
        }
        in = fmemopen(script, strlen(script), "r");
    }
    printf("ready\n");
    while (fscanf(in, "%31s", cmd) == 1) {
        if (!strcmp(cmd, "held") && fscanf(in, "%ld %ld", &n, &us) == 2) {
            for (long i = 0; i < n; i++) held_fn(us);
        } else if (!strcmp(cmd, "napped") && fscanf(in, "%ld %ld", &n, &us) == 2) {
            for (long i = 0; i < n; i++) napped_fn(us);
        } else if (!strcmp(cmd, "heldnap") && fscanf(in, "%ld %ld", &n, &us) == 2) {
            for (long i = 0; i < n; i++) { held_fn(us); napped_fn(us); }
        } else if (!strcmp(cmd, "heldss") && fscanf(in, "%ld %ld", &n, &us) == 2) {
            for (long i = 0; i < n; i++) held_ss(us);
        } else if (!strcmp(cmd, "heldnop") && fscanf(in, "%ld %ld", &n, &us) == 2) {
            for (long i = 0; i < n; i++) held_nop(us);
        } else if (!strcmp(cmd, "fast") && fscanf(in, "%ld", &n) == 1) {
            for (long i = 0; i < n; i++) fast_fn(i);
        } else if (!strcmp(cmd, "ppid") && fscanf(in, "%ld", &n) == 1) {
            for (long i = 0; i < n; i++) getppid();  /* a libc function nothing else calls */
        } else if (!strcmp(cmd, "other") && fscanf(in, "%ld", &n) == 1) {
            for (long i = 0; i < n; i++) other_fn(i);
        } else if (!strcmp(cmd, "neg") && fscanf(in, "%ld", &n) == 1) {
            for (long i = 1; i <= n; i++) negate(i);
        } else if (!strcmp(cmd, "leaf") && fscanf(in, "%ld", &n) == 1) {
            long acc = 0;
            for (long i = 0; i < n; i++) acc += leaf_fn(i);
            __asm__ volatile("" :: "r"(acc));
        } else if (!strcmp(cmd, "task") && fscanf(in, "%63s %ld %ld", name, &n, &us) == 3) {
            for (long i = 0; i < n; i++) {
                DTRACE_PROBE2(adaptyst_test, task_begin, name, us);
                held_fn(us);
                DTRACE_PROBE1(adaptyst_test, task_end, name);
            }
        } else if (!strcmp(cmd, "nested") && fscanf(in, "%ld %ld", &n, &us) == 2) {
            for (long i = 0; i < n; i++) {
                DTRACE_PROBE2(adaptyst_test, task_begin, "outer", us);
                held_fn(us);
                DTRACE_PROBE2(adaptyst_test, task_begin, "inner", us);
                held_fn(us);
                DTRACE_PROBE1(adaptyst_test, task_end, "inner");
                DTRACE_PROBE1(adaptyst_test, task_end, "outer");
            }
        } else if (!strcmp(cmd, "cpu")) {
            struct timespec t;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
            printf("cpu %ld\n", t.tv_sec * 1000000000L + t.tv_nsec);
        } else if (!strcmp(cmd, "took")) {
            long sum = 0;
            for (long i = 0; i < ntook; i++) sum += took_ns[i];
            qsort(took_ns, ntook, sizeof(long), cmp_long);
            printf("took %ld %ld %ld\n", ntook ? took_ns[(ntook - 1) / 2] : 0L,
                   ntook ? took_ns[0] : 0L, ntook ? sum / ntook : 0L);
            ntook = 0;
        } else if (!strcmp(cmd, "tick") && fscanf(in, "%ld", &n) == 1) {
            for (long i = 0; i < n; i++) DTRACE_PROBE1(adaptyst_test, tick, i);
        } else if (!strcmp(cmd, "forever") && fscanf(in, "%ld", &us) == 1) {
            for (long i = 0;; i++) {  /* a live target for the monitor's end-to-end tests */
                DTRACE_PROBE2(adaptyst_test, task_begin, i % 3 ? "spmv" : "gemm", us);
                held_fn(us);
                DTRACE_PROBE1(adaptyst_test, task_end, "x");
                for (int j = 0; j < 100; j++) fast_fn(j);
                DTRACE_PROBE1(adaptyst_test, tick, i);
                usleep(1000);
            }
        } else if (!strcmp(cmd, "await") && fscanf(in, "%4095s", path) == 1) {
            while (access(path, F_OK) != 0) usleep(10000);
        } else if (!strcmp(cmd, "sleep") && fscanf(in, "%ld", &us) == 1) {
            usleep(us * 1000);
        } else if (!strcmp(cmd, "spawn") && fscanf(in, "%ld %ld %ld", &k, &us, &n) == 3) {
            for (long c = 0; c < k; c++) {
                if (fork() == 0) {
                    usleep(us * 1000);
                    for (long i = 0; i < n; i++) fast_fn(i);
                    _exit(0);
                }
            }
            while (wait(NULL) > 0) {}
        } else if (!strcmp(cmd, "spawnexec") && fscanf(in, "%ld %ld", &us, &n) == 2) {
            if (fork() == 0) {
                char ms[24], count[24];
                snprintf(ms, sizeof ms, "%ld", us);
                snprintf(count, sizeof count, "%ld", n);
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);  /* its "ready"/"ok" are not ours to say */
                execl("/proc/self/exe", "workload", "sleep", ms, "fast", count, "exit", "0",
                      (char *)NULL);
                _exit(127);
            }
            while (wait(NULL) > 0) {}
        } else if (!strcmp(cmd, "threads") && fscanf(in, "%ld %ld %63s", &k, &n, name) == 3) {
            long (*fn)(long) = !strcmp(name, "nop5_entry") ? nop5_entry
                               : !strcmp(name, "fast")     ? fast_fn
                                                           : NULL;
            if (!fn || threads(k, n, fn) != 0) { printf("error threads %ld %s\n", k, name); continue; }
        } else if (!strcmp(cmd, "exit") && fscanf(in, "%ld", &n) == 1) {
            return (int)n;
        } else {
            printf("error %s\n", cmd);
            continue;
        }
        printf("ok\n");
    }
    return 0;
}
