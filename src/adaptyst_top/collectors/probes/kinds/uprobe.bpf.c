/* uprobe: each function's entry-to-return latency. One entry and one return program
 * serve every function of the module: the attach cookie is the function's slot. The
 * multi-link pair is the same code, loaded for the kernel's multi-uprobe links. */
#include "../bpf/module.h"

/* x86-64: the first six integer arguments are in registers. */
static __always_inline u64 arg_of(struct pt_regs *ctx, u32 n) {
    s32 at = -1;
    switch (n) {
    case 1: at = __builtin_offsetof(struct pt_regs, rdi); break;
    case 2: at = __builtin_offsetof(struct pt_regs, rsi); break;
    case 3: at = __builtin_offsetof(struct pt_regs, rdx); break;
    case 4: at = __builtin_offsetof(struct pt_regs, rcx); break;
    case 5: at = __builtin_offsetof(struct pt_regs, r8); break;
    case 6: at = __builtin_offsetof(struct pt_regs, r9); break;
    }
    return regs_word(ctx, at);
}

static __always_inline int entry(struct pt_regs *ctx) {
    struct skey k = {};
    k.slot = (u32)bpf_get_attach_cookie(ctx);
    struct slot_cfg *c = slot_of(k.slot);
    if (c && c->arg)
        key_from_value(&k, arg_of(ctx, c->arg), c->arg_type, PT_REGS_IP(ctx));
    return push_frame(0, &k, PT_REGS_SP(ctx));
}

static __always_inline int ret(struct pt_regs *ctx) {
    u32 slot = (u32)bpf_get_attach_cookie(ctx);
    struct slot_cfg *c = slot_of(slot);
    if (c && c->retval)
        return pop_frame_as(0, slot, PT_REGS_SP(ctx), 1, PT_REGS_RC(ctx), c->arg_type,
                            PT_REGS_IP(ctx));
    return pop_frame_as(0, slot, PT_REGS_SP(ctx), 0, 0, 0, 0);
}

/* A function whose first instruction the kernel must single-step: its interval starts
 * again at the first instruction after it that the kernel emulates (entry_retime.py
 * finds it, reached straight from the entry), so that the trap, the copy run out of line
 * and the second trap (~9 us here, and more at some sites than at others) stay outside
 * it, as an emulated entry's work does. Only the first arrival after this slot's entry
 * moves it: a loop that comes back there later changes nothing. */
static __always_inline int retime(struct pt_regs *ctx) {
    u32 slot = (u32)bpf_get_attach_cookie(ctx);
    struct stack *st = thread_stack(0, 0);
    if (!st || st->over) return 0;
    u32 depth = st->depth;
    if (depth == 0 || depth > MAX_DEPTH) return 0;
    struct frame *top = &st->f[(depth - 1) & (MAX_DEPTH - 1)];
    if (top->retimed || top->k.slot != slot) return 0;
    top->retimed = 1;
    run_read(top->se);
    top->cpu = bpf_get_smp_processor_id();
    top->ts = bpf_ktime_get_ns();
    return 0;
}

SEC("uprobe") int at_entry(struct pt_regs *ctx) { return entry(ctx); }
SEC("uretprobe") int at_return(struct pt_regs *ctx) { return ret(ctx); }
/* Loaded as BPF_TRACE_UPROBE_MULTI when the module's functions share links. */
SEC("uprobe") int at_multi(struct pt_regs *ctx) { return entry(ctx); }
SEC("uretprobe") int at_multi_ret(struct pt_regs *ctx) { return ret(ctx); }
SEC("uprobe") int at_after(struct pt_regs *ctx) { return retime(ctx); }
SEC("uprobe") int at_multi_after(struct pt_regs *ctx) { return retime(ctx); }
