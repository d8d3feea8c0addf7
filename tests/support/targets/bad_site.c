/* A USDT note that points inside an instruction (the middle of a movabs), beside a
 * real site: what a hostile or broken note looks like. Probed there, the kernel would
 * overwrite a byte of the constant and the sum printed would change. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>

__attribute__((noinline)) long step(long i) {
    long v;
    __asm__ volatile(
        "990: movabs $0x0102030405060708, %0\n"
        ".pushsection .note.stapsdt,\"?\",\"note\"\n"
        ".balign 4\n"
        ".4byte 992f-991f, 994f-993f, 3\n"
        "991: .asciz \"stapsdt\"\n"
        "992: .balign 4\n"
        "993: .8byte 990b+3\n"
        ".8byte _.stapsdt.base\n"
        ".8byte 0\n"
        ".asciz \"bad\"\n"
        ".asciz \"inside\"\n"
        ".asciz \"\"\n"
        "994: .balign 4\n"
        ".popsection\n"
        : "=r"(v));
    DTRACE_PROBE1(bad, good, i);
    return v ^ i;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000, sum = 0;
    for (long i = 0; i < n; i++) sum += step(i);
    printf("%ld\n", sum);
    return 0;
}
