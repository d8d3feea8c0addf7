/* Calibration target for adaptyst-top: functions whose first instruction is known,
 * so that the per-hit cost of each attach-point class can be measured on this machine.
 * Reads "NAME COUNT" lines on stdin, calls NAME COUNT times, prints nanoseconds per call.
 * x86-64 only (the entry instructions are written in assembly). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/sdt.h>

/* push %rbp: emulated by the kernel's uprobe code (no single-step). */
__asm__(".text\n.globl cal_push\n.type cal_push,@function\n"
        "cal_push:\n push %rbp\n pop %rbp\n ret\n.size cal_push,.-cal_push\n");
/* lea: must be single-stepped out of line, like the first instruction of many -O2 leaves. */
__asm__(".globl cal_lea\n.type cal_lea,@function\n"
        "cal_lea:\n lea 1(%rdi),%rax\n ret\n.size cal_lea,.-cal_lea\n");
/* The same with a one-byte nop after it, where the interval starts again (entry_retime.py):
 * of the instructions the kernel emulates, the one that costs least to emulate (a push
 * writes the stack), so that no site's net minimum reads below its fastest call. */
__asm__(".globl cal_lea_nop\n.type cal_lea_nop,@function\n"
        "cal_lea_nop:\n lea 1(%rdi),%rax\n nop\n ret\n"
        ".size cal_lea_nop,.-cal_lea_nop\n");
/* endbr64: what -fcf-protection puts first. */
__asm__(".globl cal_endbr\n.type cal_endbr,@function\n"
        "cal_endbr:\n endbr64\n ret\n.size cal_endbr,.-cal_endbr\n");
/* nop: what a USDT site is. */
__asm__(".globl cal_nop\n.type cal_nop,@function\n"
        "cal_nop:\n nop\n ret\n.size cal_nop,.-cal_nop\n");

/* A 5-byte nop first, as gcc -pg -mfentry -mnop-mcount builds every function: where the
 * kernel optimizes uprobes, a probe there becomes a call. Aligned: never across a page. */
__asm__(".p2align 4\n.globl cal_nop5\n.type cal_nop5,@function\n"
        "cal_nop5:\n .byte 0x0f,0x1f,0x44,0x00,0x00\n ret\n.size cal_nop5,.-cal_nop5\n");
/* The same behind an endbr64 (-fcf-protection too): probed on the nop, past the endbr64. */
__asm__(".p2align 4\n.globl cal_endbr_nop5\n.type cal_endbr_nop5,@function\n"
        "cal_endbr_nop5:\n endbr64\n .byte 0x0f,0x1f,0x44,0x00,0x00\n ret\n"
        ".size cal_endbr_nop5,.-cal_endbr_nop5\n");

long cal_push(long);
long cal_lea(long);
long cal_lea_nop(long);
long cal_endbr(long);
long cal_nop(long);
long cal_nop5(long);
long cal_endbr_nop5(long);

/* A hit and a begin..end pair; SFX names the set (its sites' nops differ). */
#define CAL_SITES(sfx)                                                  \
    __attribute__((noinline)) long cal_usdt##sfx(long x) {              \
        DTRACE_PROBE1(adaptyst_cal, hit##sfx, x);                       \
        __asm__ volatile("" ::: "memory");                              \
        return x;                                                       \
    }                                                                   \
    __attribute__((noinline)) long cal_pair##sfx(long x) {              \
        DTRACE_PROBE1(adaptyst_cal, begin##sfx, x);                     \
        __asm__ volatile("" ::: "memory");                              \
        DTRACE_PROBE1(adaptyst_cal, end##sfx, x);                       \
        return x;                                                       \
    }

CAL_SITES()  /* sys/sdt.h's 1-byte nops */

/* The same on 5-byte nops (as the task API's sites, placement/include/adaptyst_sdt.h):
 * where the kernel optimizes them, a call instead of a trap. */
#if defined(__x86_64__)
#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00
#endif
CAL_SITES(5)

typedef long (*fn_t)(long);

int main(void) {
    char name[32];
    long count;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    while (scanf("%31s %ld", name, &count) == 2) {
        fn_t volatile fn = !strcmp(name, "push")    ? cal_push
                           : !strcmp(name, "lea")   ? cal_lea
                           : !strcmp(name, "lea_nop") ? cal_lea_nop
                           : !strcmp(name, "endbr") ? cal_endbr
                           : !strcmp(name, "nop")   ? cal_nop
                           : !strcmp(name, "nop5")  ? cal_nop5
                           : !strcmp(name, "endbr_nop5") ? cal_endbr_nop5
                           : !strcmp(name, "usdt")  ? cal_usdt
                           : !strcmp(name, "pair")  ? cal_pair
                           : !strcmp(name, "usdt5") ? cal_usdt5
                           : !strcmp(name, "pair5") ? cal_pair5
                                                    : NULL;
        if (!fn) { printf("error unknown %s\n", name); continue; }
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < count; i++) fn(i);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
        printf("%.3f\n", ns / count);
    }
    return 0;
}
