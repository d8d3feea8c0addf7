/* Entry-instruction check target for adaptyst-top: one function per class of first
 * instruction the kernel must single-step under a uprobe. Each computes a result that
 * depends on what its first instruction did, so a probed run whose single-step went
 * wrong gives a different checksum than an unprobed one.
 * Reads "NAME COUNT" lines on stdin, prints the checksum of COUNT calls.
 * x86-64 only (the entry instructions are written in assembly). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

/* gp: a general-purpose instruction, no memory operand. */
__asm__(".text\n.globl chk_gp\n.type chk_gp,@function\n"
        "chk_gp:\n lea 7(%rdi,%rsi,2),%rax\n ret\n.size chk_gp,.-chk_gp\n");
/* gp-riprel: a RIP-relative load, which the kernel rewrites to run out of line. */
__asm__(".globl chk_riprel\n.type chk_riprel,@function\n"
        "chk_riprel:\n mov chk_const(%rip),%rax\n add %rdi,%rax\n sub %rsi,%rax\n ret\n"
        ".size chk_riprel,.-chk_riprel\n"
        ".section .rodata\n.p2align 3\nchk_const:\n .quad 0x5bd1e995\n.text\n");
/* sse: a legacy-encoded SIMD instruction (xmm state). */
__asm__(".globl chk_sse\n.type chk_sse,@function\n"
        "chk_sse:\n movq %rdi,%xmm0\n movq %rsi,%xmm1\n paddq %xmm1,%xmm0\n movq %xmm0,%rax\n ret\n"
        ".size chk_sse,.-chk_sse\n");
/* vex: an AVX2 instruction writing a whole ymm register (upper half included). */
__asm__(".globl chk_vex\n.type chk_vex,@function\n"
        "chk_vex:\n vpbroadcastq (%rdx),%ymm1\n vextracti128 $1,%ymm1,%xmm2\n vmovq %xmm2,%rax\n"
        " add %rdi,%rax\n vzeroupper\n ret\n.size chk_vex,.-chk_vex\n");
/* evex: an AVX-512 instruction on a register only EVEX reaches (as glibc's *_evex). */
__asm__(".globl chk_evex\n.type chk_evex,@function\n"
        "chk_evex:\n vpbroadcastd %esi,%ymm17\n vextracti32x4 $1,%ymm17,%xmm18\n"
        " vmovd %xmm18,%eax\n add %rdi,%rax\n ret\n.size chk_evex,.-chk_evex\n");
/* evex-zmm: the same on a full zmm register (as glibc's memset_avx512). */
__asm__(".globl chk_evex_zmm\n.type chk_evex_zmm,@function\n"
        "chk_evex_zmm:\n vpbroadcastb %esi,%zmm16\n vextracti32x4 $3,%zmm16,%xmm19\n"
        " vmovd %xmm19,%eax\n add %rdi,%rax\n ret\n.size chk_evex_zmm,.-chk_evex_zmm\n");

long chk_gp(long, long, const long *);
long chk_riprel(long, long, const long *);
long chk_sse(long, long, const long *);
long chk_vex(long, long, const long *);
long chk_evex(long, long, const long *);
long chk_evex_zmm(long, long, const long *);

typedef long (*fn_t)(long, long, const long *);

int main(void) {
    char name[32];
    long count;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    while (scanf("%31s %ld", name, &count) == 2) {
        fn_t volatile fn = !strcmp(name, "gp")         ? chk_gp
                           : !strcmp(name, "riprel")   ? chk_riprel
                           : !strcmp(name, "sse")      ? chk_sse
                           : !strcmp(name, "vex")      ? chk_vex
                           : !strcmp(name, "evex")     ? chk_evex
                           : !strcmp(name, "evex_zmm") ? chk_evex_zmm
                                                       : NULL;
        if (!fn) { printf("error unknown %s\n", name); continue; }
        unsigned long sum = 0;
        for (long i = 0; i < count; i++) {
            long v = i * 2654435761L;
            sum = sum * 31 + (unsigned long)fn(i, v & 0x7fffffff, &v);
        }
        printf("%lu\n", sum);
    }
    return 0;
}
