/* USDT probe sites on 5-byte nops (sys/sdt.h's own are 1-byte).
 *
 * The probe notes are sys/sdt.h's, unchanged: every USDT reader (bcc, bpftrace,
 * `readelf -n`, libbpf) finds and attaches them as before. Only the instruction at the
 * site differs: `nopl 0x0(%rax,%rax,1)` (0f 1f 44 00 00), which Linux 6.18 and newer
 * on x86-64 turn into a call on a probe's first hit, instead of a trap on every hit
 * (as libbpf's usdt.h allows with USDT_NOP, and the kernel's selftests do). On other
 * kernels a probe there traps as on a 1-byte nop; with nothing attached it is a nop.
 *
 * Include this instead of <sys/sdt.h>. ADAPTYST_HAS_SDT says whether sites exist. */
#ifndef ADAPTYST_SDT_H
#define ADAPTYST_SDT_H

#if defined(__has_include)
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define ADAPTYST_HAS_SDT 1
#endif
#endif

#if ADAPTYST_HAS_SDT + 0
#if defined(__x86_64__)
/* Expanded where a probe is used, so redefining it here is enough. No commas: sdt.h
 * passes it through macros of one argument. */
#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00
#endif
#else
#undef ADAPTYST_HAS_SDT
#define ADAPTYST_HAS_SDT 0
#define DTRACE_PROBE5(p, n, a, b, c, d, e) do {} while (0)
#define DTRACE_PROBE2(p, n, a, b) do {} while (0)
#endif

#endif
