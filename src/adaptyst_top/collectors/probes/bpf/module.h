/* A probe module's maps and interval logic, compiled once with the package (CO-RE: no
 * kernel headers, no compiler on the node). Each kind's program (kinds/<kind>.bpf.c)
 * includes this and adds its entry points; the attach cookie tells which probe fired.
 * What varies per module (whose processes count, kernel offsets, map sizes) is set by
 * user space before load: `cfg` below and each map's max_entries and flags.
 * bpf/program.py keeps the same constants for the Python side; the structs are
 * generated from bpf/layouts.py (structs.h). */
#ifndef ADAPTYST_MODULE_H
#define ADAPTYST_MODULE_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "theirs.h"

#define KEYLEN 32
#define MAX_DEPTH 16
#define SUB 16
#define SUB_BITS 4

enum { KEY_NONE = 0, KEY_INT = 1, KEY_STR = 2, KEY_PTR = 3 };
enum { ARG_AUTO = 0, ARG_INT = 1, ARG_STR = 2 };
enum { ERR_MAP_FULL = 0, ERR_TOO_DEEP = 1, ERR_NO_ENTRY = 2, ERR_BAD_COUNT = 3, ERR_BAD_TIME = 4,
       NERRORS = 5 };

#include "structs.h"  /* the structs user space reads too (layouts.py) */

const volatile struct module_config cfg = {};

static __always_inline int theirs(void) { return theirs_in(&cfg.confine); }

/* max_entries and flags of each are set per module before load. */
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, struct skey); __type(value, struct stat);
         __uint(max_entries, 1); } stats SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, struct hkey); __type(value, u64);
         __uint(max_entries, 1); } hist SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, struct tkey); __type(value, struct stack);
         __uint(max_entries, 16384); __uint(map_flags, BPF_F_NO_PREALLOC); } stacks SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, struct stack);
         __uint(max_entries, 1); } stack_init SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, u64);
         __uint(max_entries, NERRORS); } errors SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, u8);
         __uint(max_entries, 1); } gate SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, struct slot_cfg);
         __uint(max_entries, 1); } slots SEC(".maps");

/* se: exec_start, sum_exec_runtime of the current thread (oncpu.py says why). */
static __always_inline void run_read(u64 *se) {
    se[0] = 0; se[1] = 0;
    if (!cfg.oncpu) return;
    char *task = (char *)bpf_get_current_task();
    if (bpf_probe_read_kernel(se, 16, task + cfg.oncpu_at)) { se[0] = 0; se[1] = 0; }
}

/* The word at byte AT of the registers (-1, or past them: 0). Read through a helper: a
 * choice among context loads is merged by clang into one the verifier refuses. */
static __always_inline u64 regs_word(struct pt_regs *ctx, s32 at) {
    u64 v = 0;
    if (at >= 0 && at <= (s32)(sizeof(struct pt_regs) - sizeof(u64)))
        bpf_probe_read_kernel(&v, sizeof(v), (char *)ctx + at);
    return v;
}

static __always_inline int gated(u32 slot) {
    u8 *g = bpf_map_lookup_elem(&gate, &slot);
    return g && *g;
}

static __always_inline void count_error(u32 i) {
    u64 *e = bpf_map_lookup_elem(&errors, &i);
    if (e) __sync_fetch_and_add(e, 1);
}

static __always_inline u32 log2_u64(u64 v) {
    u32 r = 0;
    if (v >> 32) { v >>= 32; r += 32; }
    if (v >> 16) { v >>= 16; r += 16; }
    if (v >> 8)  { v >>= 8;  r += 8; }
    if (v >> 4)  { v >>= 4;  r += 4; }
    if (v >> 2)  { v >>= 2;  r += 2; }
    if (v >> 1)  { r += 1; }
    return r;
}

static __always_inline u32 bucket_of(u64 v) {
    if (v < SUB) return (u32)v;
    u32 e = log2_u64(v);
    return SUB * (e - SUB_BITS + 1) + (u32)((v >> (e - SUB_BITS)) & (SUB - 1));
}

static __always_inline struct stat *stat_of(struct skey *k) {
    struct stat *s = bpf_map_lookup_elem(&stats, k);
    if (s) return s;
    struct stat zero = {};
    zero.min = ~0ULL;
    bpf_map_update_elem(&stats, k, &zero, BPF_NOEXIST);
    return bpf_map_lookup_elem(&stats, k);
}

/* K filed under the process that hit it, where each process is counted apart. */
static __always_inline void by_process(struct skey *k) {
    if (cfg.by_process) k->pid = bpf_get_current_pid_tgid() >> 32;
}

/* The count goes last: a reader that sees a hit counted sees its time and bucket too. */
static __always_inline void record(struct skey *k, u64 delta, u64 oncpu, int latency) {
    by_process(k);
    struct stat *s = stat_of(k);
    if (!s) { count_error(ERR_MAP_FULL); return; }
    if (latency) {
        __sync_fetch_and_add(&s->sum, delta);
        if (cfg.oncpu) __sync_fetch_and_add(&s->oncpu, oncpu);
        /* min/max races between CPUs only lose an extreme by one sample; counts stay exact */
        if (delta < s->min) s->min = delta;
        if (delta > s->max) s->max = delta;
        struct hkey h = {};
        h.k = *k;
        h.bucket = bucket_of(delta);
        u64 *c = bpf_map_lookup_elem(&hist, &h);
        if (!c) {
            u64 hz = 0;
            /* NOEXIST: of two CPUs making the same bucket, one counts it */
            if (bpf_map_update_elem(&hist, &h, &hz, BPF_NOEXIST) == 0)
                __sync_fetch_and_add(&s->buckets, 1);
            c = bpf_map_lookup_elem(&hist, &h);
        }
        if (c) __sync_fetch_and_add(c, 1); else count_error(ERR_MAP_FULL);
    }
    __sync_fetch_and_add(&s->count, 1);
}

static __always_inline struct stack *thread_stack(u32 chain, int create) {
    struct tkey t = {};
    t.tid = bpf_get_current_pid_tgid();
    t.chain = chain;
    struct stack *st = bpf_map_lookup_elem(&stacks, &t);
    if (st || !create) return st;
    u32 z = 0;
    struct stack *init = bpf_map_lookup_elem(&stack_init, &z);
    if (!init) return 0;
    bpf_map_update_elem(&stacks, &t, init, BPF_ANY);
    st = bpf_map_lookup_elem(&stacks, &t);
    if (!st) count_error(ERR_MAP_FULL);
    return st;
}

/* A user-space address: above the first 64 KiB, below x86-64's 47-bit user half. */
#define USER_PTR(v) ((v) >= 0x10000 && (v) < (1ULL << 47))
/* ip: where the probe fired: places the target's binary, read for a string when the
 * process is gone before its read. */
static __always_inline void key_from_value(struct skey *k, u64 v, int type, u64 ip) {
    long n = -1;
    if (type != ARG_INT && USER_PTR(v)) {
        n = bpf_probe_read_user_str(k->str, sizeof(k->str), (void *)v);
        if (n > 1 || (n == 1 && type == ARG_STR)) { k->kind = KEY_STR; return; }
        __builtin_memset(k->str, 0, sizeof(k->str));
    }
    if ((type == ARG_STR && USER_PTR(v)) || (type == ARG_AUTO && n < 0 && USER_PTR(v))) {
        /* Not readable here (a page not faulted in yet): user space reads it. */
        u32 tgid = bpf_get_current_pid_tgid() >> 32;
        k->kind = KEY_PTR;
        k->num = v;
        __builtin_memcpy(k->str, &tgid, sizeof(tgid));
        __builtin_memcpy(k->str + 8, &ip, sizeof(ip));
        return;
    }
    k->kind = KEY_INT;
    k->num = v;
}

/* sp: the stack pointer at a function's entry (0 for USDT). The same call seen again at
 * the same sp (a second link, a return never seen) restarts the frame on top. */
static __always_inline int push_frame(u32 chain, struct skey *k, u64 sp) {
    if (!theirs() || gated(k->slot)) return 0;
    struct stack *st = thread_stack(chain, 1);
    if (!st) return 0;
    u32 depth = st->depth;
    if (sp && depth > 0 && depth <= MAX_DEPTH && !st->over) {
        struct frame *top = &st->f[(depth - 1) & (MAX_DEPTH - 1)];
        if (top->sp == sp && top->k.slot == k->slot) {
            top->retimed = 0;
            run_read(top->se);
            top->cpu = bpf_get_smp_processor_id();
            top->ts = bpf_ktime_get_ns();
            return 0;
        }
    }
    if (depth >= MAX_DEPTH) { st->over++; count_error(ERR_TOO_DEEP); return 0; }
    struct frame *fr = &st->f[depth & (MAX_DEPTH - 1)];
    fr->k = *k;
    fr->sp = sp;
    fr->retimed = 0;
    st->depth = depth + 1;
    run_read(fr->se);
    fr->cpu = bpf_get_smp_processor_id();
    fr->ts = bpf_ktime_get_ns();   /* last: the probe's own work before this stays outside */
    return 0;
}

#define NO_SLOT 0xffffffff
static __always_inline void no_entry(void) {
    if (theirs()) count_error(ERR_NO_ENTRY);
}
/* Ends the call on top of CHAIN's stack and records its time: SLOT must be the frame's
 * (NO_SLOT: any), RET_SP the stack pointer its return lands on (0: unchecked); with
 * BY_RET the key is the return value RV read as TYPE (IP for a string's reader). */
static __always_inline int pop_frame_as(u32 chain, u32 slot, u64 ret_sp, int by_ret, u64 rv,
                                        int type, u64 ip) {
    u64 now = bpf_ktime_get_ns();
    u64 se[2];
    run_read(se);
    struct stack *st = thread_stack(chain, 0);
    if (!st || st->depth == 0) { no_entry(); return 0; }
    if (st->over) { st->over--; return 0; }
    u32 depth = st->depth - 1;
    if (depth >= MAX_DEPTH) return 0;
    struct frame *fr = &st->f[depth & (MAX_DEPTH - 1)];
    if (slot != NO_SLOT && fr->k.slot != slot) { no_entry(); return 0; }
    if (ret_sp && fr->sp && fr->sp + 8 != ret_sp) { no_entry(); return 0; }
    st->depth = depth;
    if (slot == NO_SLOT && !theirs()) return 0;
    struct skey k = fr->k;
    if (by_ret) key_from_value(&k, rv, type, ip);
    u64 delta = now - fr->ts;
    s64 oncpu = (s64)(se[1] - se[0]) - (s64)(fr->se[1] - fr->se[0]) + (s64)delta;
    if (fr->cpu != bpf_get_smp_processor_id()) oncpu = (s64)(se[1] - fr->se[1]);
    if (oncpu < 0) oncpu = 0;
    if (oncpu > (s64)delta) oncpu = delta;
    if (gated(k.slot)) return 0;
    record(&k, delta, (u64)oncpu, 1);
    return 0;
}

/* N hits counted elsewhere, handed over at once (more than one holds: garbage). */
#define MAX_ADD 65536
static __always_inline void add_count(struct skey *k, u64 n) {
    if (n > MAX_ADD) { count_error(ERR_BAD_COUNT); return; }
    by_process(k);
    struct stat *s = stat_of(k);
    if (!s) { count_error(ERR_MAP_FULL); return; }
    __sync_fetch_and_add(&s->count, n);
}

/* A batch of N records {name, device ns, on a CPU} at user address P, each launch timed
 * on a device's own clock (UNTIMED, or past a day: counted only, so that no sum of the
 * target's word wraps), filed under its name in SLOT's row. */
#define BATCH_MAX 64
#define UNTIMED 0xffffffffffffffffULL   /* bpf/program.py's UNTIMED */
#define MAX_TIMED_NS (1ULL << 46)
struct timed_rec { u64 name; u64 device; u64 on_cpu; };
static __always_inline int file_batch(struct pt_regs *ctx, u32 slot, u64 p, u64 n) {
    if (n > BATCH_MAX) { count_error(ERR_BAD_COUNT); return 0; }
#pragma clang loop unroll(disable)
    for (u32 i = 0; i < BATCH_MAX; i++) {
        if (i >= n) break;
        struct timed_rec r = {};
        if (bpf_probe_read_user(&r, sizeof(r), (void *)(p + i * sizeof(r)))) break;
        struct skey k = {.slot = slot};
        if (r.device != UNTIMED && r.device >= MAX_TIMED_NS) { count_error(ERR_BAD_TIME); r.device = UNTIMED; }
        key_from_value(&k, r.name, ARG_STR, PT_REGS_IP(ctx));
        record(&k, r.device, r.on_cpu ? r.device : 0, r.device != UNTIMED);
    }
    return 0;
}

static __always_inline struct slot_cfg *slot_of(u32 slot) {
    if (!cfg.keyed) return 0;
    return bpf_map_lookup_elem(&slots, &slot);
}

/* A thread's interval stacks go when it exits: its number may be another user's
 * thread's next, whose returns would otherwise pop a frame left open here (a return asks
 * no theirs(): its entry did). User space's reap_dead_threads is the second net. */
SEC("raw_tp/sched_process_exit")
int module_exit(void *args) {
    struct tkey t = {};
    t.tid = bpf_get_current_pid_tgid();
    bpf_map_delete_elem(&stacks, &t);
    t.chain = 1;   /* a USDT pair's */
    bpf_map_delete_elem(&stacks, &t);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";

#endif
