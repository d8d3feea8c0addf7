"""The C source of one probe module: shared statistics maps and one tiny entry
program per attach point.

Every attach point gets a slot number baked into its own 3-line program, so the
kernel knows which probe fired without a lookup; the heavy code is shared and
inlined. All uretprobes share a single program: a per-thread stack of entry frames
tells which probe a return belongs to, which also makes recursion and nested
USDT pairs match last-in, first-out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from adaptyst_top.collectors.probes.confinement import Confinement, theirs_source
from adaptyst_top.collectors.probes.oncpu import NO_MARK
from adaptyst_top.collectors.probes.usdt_args import UsdtArg, reader
from adaptyst_top.snapshot.histogram import SUB, SUB_BITS

KEYLEN = 32
MAX_DEPTH = 16  # a power of two (the verifier needs the mask)
MAX_THREADS = 16384
MAX_KEYS = 16384  # a module whose keys come from an @argN (any number of them)
HIST_ENTRIES = 131072
# The most buckets one key can fill: 16 per power of two over 64 bits (bucket_of).
HIST_PER_KEY = 1024


# The C enums in PRELUDE are generated from these: one definition for both sides.
class KeyKind(IntEnum):
    """What a statistics key holds, as the kernel writes it."""

    NONE = 0
    INT = 1
    STR = 2
    PTR = 3  # an address the kernel could not read: user space reads the string


class ArgType(IntEnum):
    """How an @argN value is keyed: as the spec asks (`@arg1:str`) or guessed."""

    AUTO = 0  # a value that reads as a user-space C string is a string
    INT = 1
    STR = 2


class KernelError(IntEnum):
    """Indexes of the `errors` array the programs count into."""

    MAP_FULL = 0
    TOO_DEEP = 1
    NO_ENTRY = 2  # a return without a recorded entry
    BAD_COUNT = 3  # a hand-over of more hits than one can hold
    BAD_TIME = 4  # a handed-over time past a day: counted, not timed


def _c_enum(e: type[IntEnum], prefix: str) -> str:
    return "enum { " + ", ".join(f"{prefix}{m.name} = {m.value}" for m in e) + " };"


SlotRole = Literal["uprobe-entry", "usdt-count", "usdt-begin", "usdt-end", "usdt-batch", "usdt-add"]

# The two programs of a module whose functions attach through multi-uprobe links: the
# link's cookie is the slot.
MULTI_ENTRY, MULTI_RETURN = "at_multi", "at_multi_ret"
MULTI_PROGRAMS = f"""
int {MULTI_ENTRY}(struct pt_regs *ctx) {{
    struct skey k = {{}}; k.slot = (u32)bpf_get_attach_cookie(ctx);
    return push_frame(0, &k, PT_REGS_SP(ctx));
}}
int {MULTI_RETURN}(struct pt_regs *ctx) {{
    return pop_frame(0, (u32)bpf_get_attach_cookie(ctx), PT_REGS_SP(ctx));
}}
"""

PRELUDE = r"""
#include <uapi/linux/ptrace.h>

#define KEYLEN %(keylen)d
#define MAX_DEPTH %(max_depth)d
#define SUB %(sub)d
#define SUB_BITS %(sub_bits)d

%(enums)s

struct skey { u32 slot; u32 kind; u64 num; char str[KEYLEN]; };
/* buckets: how many histogram entries this key has (a reader looks up only those) */
struct stat { u64 count; u64 sum; u64 min; u64 max; u64 buckets; u64 oncpu; };
struct hkey { struct skey k; u32 bucket; u32 pad; };
struct tkey { u64 tid; u32 chain; u32 pad; };
/* sp: a uprobe's at entry, else 0; se: run_read() at entry, on CPU cpu */
struct frame { u64 ts; u64 sp; u64 se[2]; u32 cpu; u32 pad; struct skey k; };

/* keyed (@argN): allocated as keys come, so the kernel holds what is used, not the most */
BPF_F_TABLE("hash", struct skey, struct stat, stats, %(max_keys)d, %(map_flags)s);
BPF_F_TABLE("hash", struct hkey, u64, hist, %(hist_entries)d, %(map_flags)s);
/* One stack of open intervals per thread and chain, written in place (a lookup at entry,
 * one at return); made at a thread's first hit, removed by the engine once it exits. */
struct stack { u32 depth; u32 over; struct frame f[MAX_DEPTH]; };  /* over: pushes past MAX_DEPTH */
BPF_F_TABLE("hash", struct tkey, struct stack, stacks, %(max_threads)d, BPF_F_NO_PREALLOC);
BPF_ARRAY(stack_init, struct stack, 1);   /* a zeroed stack: too big for the BPF stack */
BPF_ARRAY(errors, u64, %(nerrors)d);   /* counts per KernelError */
/* Per slot: 1 = switched off, at once (a detach, which waits in the kernel, follows). */
BPF_ARRAY(gate, u8, %(nslots)d);
%(theirs)s
%(oncpu)s
static __always_inline int gated(u32 slot) {
    u8 *g = gate.lookup(&slot);
    return g && *g;
}

static __always_inline void count_error(u32 i) {
    u64 *e = errors.lookup(&i);
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

/* oncpu: the part of DELTA the thread spent on a CPU. The count goes last: a reader that
 * sees a hit counted sees its time and bucket too (it reads the histograms again only
 * when a count changed). */
static __always_inline void record(struct skey *k, u64 delta, u64 oncpu, int latency) {
    struct stat zero = {};
    zero.min = ~0ULL;
    struct stat *s = stats.lookup_or_try_init(k, &zero);
    if (!s) { count_error(ERR_MAP_FULL); return; }
    if (latency) {
        __sync_fetch_and_add(&s->sum, delta);
        if (MEASURES_ONCPU) __sync_fetch_and_add(&s->oncpu, oncpu);
        /* min/max races between CPUs only lose an extreme by one sample; counts stay exact */
        if (delta < s->min) s->min = delta;
        if (delta > s->max) s->max = delta;
        struct hkey h = {};
        h.k = *k;
        h.bucket = bucket_of(delta);
        u64 *c = hist.lookup(&h);
        if (!c) {
            u64 hz = 0;
            /* NOEXIST: of two CPUs making the same bucket, one counts it */
            if (hist.insert(&h, &hz) == 0) __sync_fetch_and_add(&s->buckets, 1);
            c = hist.lookup(&h);
        }
        if (c) __sync_fetch_and_add(c, 1); else count_error(ERR_MAP_FULL);
    }
    __sync_fetch_and_add(&s->count, 1);
}

/* N hits counted elsewhere, handed over at once (more than one holds: garbage). */
#define MAX_ADD 65536
static __always_inline void add_count(struct skey *k, u64 n) {
    if (n > MAX_ADD) { count_error(ERR_BAD_COUNT); return; }
    struct stat zero = {};
    zero.min = ~0ULL;
    struct stat *s = stats.lookup_or_try_init(k, &zero);
    if (!s) { count_error(ERR_MAP_FULL); return; }
    __sync_fetch_and_add(&s->count, n);
}

static __always_inline struct stack *thread_stack(u32 chain, int create) {
    struct tkey t = {};
    t.tid = bpf_get_current_pid_tgid();
    t.chain = chain;
    struct stack *st = stacks.lookup(&t);
    if (st || !create) return st;
    u32 z = 0;
    struct stack *init = stack_init.lookup(&z);
    if (!init) return 0;
    stacks.update(&t, init);
    st = stacks.lookup(&t);
    if (!st) count_error(ERR_MAP_FULL);
    return st;
}

/* ip: where the probe fired: places the target's binary, read for a string when the
 * process is gone before its read. */
/* A user-space address: above the first 64 KiB, below x86-64's 47-bit user half. A
 * value outside (a negative ssize_t, -1) is a number, never a pointer to read. */
#define USER_PTR(v) ((v) >= 0x10000 && (v) < (1ULL << 47))
static __always_inline void key_from_value(struct skey *k, u64 v, int type, u64 ip) {
    long n = -1;
    if (type != ARG_INT && USER_PTR(v)) {
        n = bpf_probe_read_user_str(k->str, sizeof(k->str), (void *)v);
        if (n > 1 || (n == 1 && type == ARG_STR)) { k->kind = KEY_STR; return; }
        __builtin_memset(k->str, 0, sizeof(k->str));
    }
    if ((type == ARG_STR && USER_PTR(v)) || (type == ARG_AUTO && n < 0 && USER_PTR(v))) {
        /* Not readable here (a page not faulted in yet): user space reads it, with the
         * process it lives in; never filed as a number. */
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

/* A batch of N records {name, device ns, on a CPU} at user address P, each launch timed
 * on a device's own clock (UNTIMED, or past a day: counted only, so that no sum of the
 * target's word wraps), filed under its name in SLOT's row. */
#define BATCH_MAX 64
#define UNTIMED %(untimed)s
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

/* sp: the stack pointer at a function's entry (0 for USDT). The same call seen again at
 * the same sp (a second link, a return never seen) restarts the frame on top. */
static __always_inline int push_frame(u32 chain, struct skey *k, u64 sp) {
    if (!theirs() || gated(k->slot)) return 0;   /* a return needs no asking: it was let in */
    struct stack *st = thread_stack(chain, 1);
    if (!st) return 0;
    u32 depth = st->depth;
    if (sp && depth > 0 && depth <= MAX_DEPTH && !st->over) {
        struct frame *top = &st->f[(depth - 1) & (MAX_DEPTH - 1)];
        if (top->sp == sp && top->k.slot == k->slot) {
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
    st->depth = depth + 1;
    run_read(fr->se);
    fr->cpu = bpf_get_smp_processor_id();
    fr->ts = bpf_ktime_get_ns();   /* last: the probe's own work before this stays outside */
    return 0;
}

/* slot: the probe whose return this is, or NO_SLOT for a USDT END (any BEGIN of the
 * chain matches). A return whose own entry was not recorded (switched off, or
 * attached mid-call) finds another probe's frame on top and leaves it alone.
 * ret_sp: a uretprobe's stack pointer, one return address above the entry's (x86-64),
 * so a return seen twice (two links meanwhile) pops its frame once; 0 for USDT. */
#define NO_SLOT 0xffffffff
/* A return with no entry of its own; not counted in a process that is not the user's
 * (its returns pass here, the entries having been turned away): that count would tell. */
static __always_inline void no_entry(void) {
    if (theirs()) count_error(ERR_NO_ENTRY);
}
/* by_ret: the key is the return value RV (@retval), read as TYPE; the frame's is its slot's */
static __always_inline int pop_frame_as(u32 chain, u32 slot, u64 ret_sp, int by_ret, u64 rv,
                                        int type, u64 ip) {
    u64 now = bpf_ktime_get_ns();  /* first: the rest of this handler stays outside */
    u64 se[2];
    run_read(se);
    struct stack *st = thread_stack(chain, 0);
    if (!st || st->depth == 0) { no_entry(); return 0; }
    if (st->over) { st->over--; return 0; }   /* the matching push was too deep to record */
    u32 depth = st->depth - 1;
    if (depth >= MAX_DEPTH) return 0;
    struct frame *fr = &st->f[depth & (MAX_DEPTH - 1)];
    if (slot != NO_SLOT && fr->k.slot != slot) { no_entry(); return 0; }
    if (ret_sp && fr->sp && fr->sp + 8 != ret_sp) { no_entry(); return 0; }
    st->depth = depth;
    /* A USDT END is not tied to its BEGIN's frame: a BEGIN before a setuid exec and an
     * END in the program it became would time that program. Popped, not recorded. */
    if (slot == NO_SLOT && !theirs()) return 0;
    struct skey k = fr->k;
    if (by_ret) key_from_value(&k, rv, type, ip);
    u64 delta = now - fr->ts;
    /* on a CPU: the wall time less the time the thread was off one (see oncpu.py). Each
     * CPU's task clock leaves out its own IRQ and steal time: across CPUs the offsets
     * do not cancel, and the run time's growth alone is taken (off by a tick at most). */
    s64 oncpu = (s64)(se[1] - se[0]) - (s64)(fr->se[1] - fr->se[0]) + (s64)delta;
    if (fr->cpu != bpf_get_smp_processor_id()) oncpu = (s64)(se[1] - fr->se[1]);
    if (oncpu < 0) oncpu = 0;
    if (oncpu > (s64)delta) oncpu = delta;
    if (gated(k.slot)) return 0;   /* switched off while open: popped, not recorded */
    record(&k, delta, (u64)oncpu, 1);
    return 0;
}
#define pop_frame(chain, slot, ret_sp) pop_frame_as(chain, slot, ret_sp, 0, 0, 0, 0)

"""


@dataclass(frozen=True)
class Slot:
    """One attach point's program: which role it plays and where its key comes from."""

    index: int  # 0.. within its module
    role: SlotRole
    chain: int = 0  # USDT pairs: one stack per pair (uprobes share chain 0)
    arg: int | None = None
    arg_type: str = "auto"
    retval: bool = False  # a uprobe keyed by its return value (@retval)
    # A USDT @argN: where it lies, one program per distinct location among the sites.
    readers: tuple[UsdtArg, ...] = ()
    # usdt-batch, usdt-add: each site argument's place (records, their number; a name, its hits)
    args: tuple[UsdtArg, ...] = ()
    files_as: int | None = None  # the slot whose row its keys and gate are (None: its own)

    @property
    def keyed(self) -> bool:
        return self.arg is not None or self.retval

    @property
    def fn_name(self) -> str:
        return f"at_s{self.index}"

    def variant_name(self, j: int) -> str:
        """The program of the Jth of `readers` (the first is fn_name)."""
        return self.fn_name if j == 0 else f"{self.fn_name}_{j}"

    @property
    def fn_names(self) -> list[str]:
        return [self.variant_name(j) for j in range(max(1, len(self.readers)))]

    @property
    def ret_fn_name(self) -> str:
        return f"at_r{self.index}"


_ARG_TYPE = {"auto": ArgType.AUTO, "int": ArgType.INT, "str": ArgType.STR}


UNTIMED = (1 << 64) - 1  # a batch record's device time for "counted, not timed" (PRELUDE's)


def slot_program(slot: Slot) -> str:
    key = f"struct skey k = {{}}; k.slot = {slot.index};"
    arg_type = f"ARG_{_ARG_TYPE[slot.arg_type].name}"
    if slot.role in ("usdt-batch", "usdt-add"):
        # Asked first: a gated site or another user's process costs no reads.
        row = slot.index if slot.files_as is None else slot.files_as
        first, second = (reader(a) for a in slot.args)
        body = f"u64 v = 0; {first} u64 a = v; v = 0; {second} u64 b = v;"
        if slot.role == "usdt-batch":
            body += f" return file_batch(ctx, {row}, a, b);"
        else:
            body += f" struct skey k = {{}}; k.slot = {row};"
            body += (
                f" key_from_value(&k, a, {arg_type}, PT_REGS_IP(ctx)); add_count(&k, b); return 0;"
            )
        return f"int {slot.fn_name}(struct pt_regs *ctx) {{ if (!theirs() || gated({row})) return 0; {body} }}"
    if slot.arg is not None and slot.role == "uprobe-entry":
        # A function's entry: its first six integer arguments are in registers (x86-64).
        key += f" key_from_value(&k, PT_REGS_PARM{slot.arg}(ctx), {arg_type}, PT_REGS_IP(ctx));"
    elif slot.arg is not None:
        # One program per location the argument has among the probe's sites.
        keyed = [
            f"{key} u64 v = 0; {r} key_from_value(&k, v, {arg_type}, PT_REGS_IP(ctx));"
            for r in map(reader, slot.readers)
        ]
        return "\n".join(
            f"int {slot.variant_name(j)}(struct pt_regs *ctx) {{ {k} {_body(slot)} }}"
            for j, k in enumerate(keyed)
        )
    if slot.role == "usdt-end":
        key = ""  # the key travels in the frame pushed by BEGIN
    prog = f"int {slot.fn_name}(struct pt_regs *ctx) {{ {key} {_body(slot)} }}"
    if slot.role == "uprobe-entry":
        # Its own return program: a return can check that the frame on top is its own.
        by_ret = f"1, PT_REGS_RC(ctx), {arg_type}, PT_REGS_IP(ctx)" if slot.retval else "0, 0, 0, 0"
        prog += (
            f"\nint {slot.ret_fn_name}(struct pt_regs *ctx) "
            f"{{ return pop_frame_as(0, {slot.index}, PT_REGS_SP(ctx), {by_ret}); }}"
        )
    return prog


def _body(slot: Slot) -> str:
    return {
        "uprobe-entry": "return push_frame(0, &k, PT_REGS_SP(ctx));",
        "usdt-begin": f"return push_frame({slot.chain}, &k, 0);",
        "usdt-count": f"if (!theirs() || gated({slot.index})) return 0; record(&k, 0, 0, 0); return 0;",
        "usdt-end": f"return pop_frame({slot.chain}, NO_SLOT, 0);",
    }[slot.role]


def map_sizes(slots: list[Slot]) -> tuple[int, int]:
    """Entries of the statistics and histogram maps. Without an @argN a slot has one key,
    so the maps hold exactly what they can need: reading a hash map walks every bucket
    it has (0.3 ms for an empty one of 131,072 here, every interval, per module)."""
    if any(s.keyed for s in slots):
        return MAX_KEYS, HIST_ENTRIES
    keys = max(1, len(slots))
    return keys, min(HIST_ENTRIES, keys * HIST_PER_KEY)


def module_source(
    slots: list[Slot],
    multi: bool = False,
    confine: Confinement | None = None,
    oncpu: str | None = NO_MARK,
) -> str:
    """The module's C source. MULTI: its functions attach through multi-uprobe links, so
    they share two programs (keyed by cookie) instead of two each. CONFINE: hits count
    only in that user's processes, while they are theirs. ONCPU: `oncpu_source()` to
    measure each call's on-CPU time (NO_MARK or None: not measured)."""
    max_keys, hist_entries = map_sizes(slots)
    keyed = any(s.keyed for s in slots)
    prelude = PRELUDE % {
        "map_flags": "BPF_F_NO_PREALLOC" if keyed else "0",
        "keylen": KEYLEN,
        "max_depth": MAX_DEPTH,
        "sub": SUB,
        "sub_bits": SUB_BITS,
        "max_keys": max_keys,
        "hist_entries": hist_entries,
        "nslots": max(1, len(slots)),
        "max_threads": MAX_THREADS,
        "enums": "\n".join(
            (_c_enum(KeyKind, "KEY_"), _c_enum(ArgType, "ARG_"), _c_enum(KernelError, "ERR_"))
        ),
        "nerrors": len(KernelError),
        "untimed": f"{UNTIMED:#x}ULL",
        "theirs": theirs_source(confine),
        "oncpu": oncpu or NO_MARK,
    }
    if multi:
        return prelude + MULTI_PROGRAMS
    return prelude + "\n" + "\n".join(slot_program(s) for s in slots) + "\n"
