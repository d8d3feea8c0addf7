/* USDT: a static probe's hits, a BEGIN..END pair's latency, and the device layers'
 * hand-overs (a batch of timed launches, a count of untimed ones). One program per role
 * serves every site: the attach cookie holds the site's slot (low 32 bits) and where its
 * argument readers start in `args` (high 32 bits; NO_ARGS: none). A location is what
 * the site's SDT note says (usdt_args.py), read here as data, not generated C. */
#include "../bpf/module.h"

#define NO_ARGS 0xffffffff
enum { LOC_NONE = 0, LOC_CONST = 1, LOC_REG = 2, LOC_MEM = 3 };   /* module_object.LOC_* */

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, struct arg_loc);
         __uint(max_entries, 1); } args SEC(".maps");

/* Argument I's value, widened as its size and sign say; a failed read of user memory
 * leaves 0. */
static __always_inline u64 read_arg(struct pt_regs *ctx, u32 i) {
    struct arg_loc *a = bpf_map_lookup_elem(&args, &i);
    if (!a) return 0;
    u64 v = 0;
    if (a->kind == LOC_CONST) {
        v = a->value;
    } else if (a->kind == LOC_REG) {
        v = regs_word(ctx, a->reg);
    } else if (a->kind == LOC_MEM) {
        u64 addr = regs_word(ctx, a->base) + a->disp;
        if (a->index >= 0) addr += regs_word(ctx, a->index) * a->scale;
        u32 n = a->size;
        if (n == 1) { u8 t = 0; bpf_probe_read_user(&t, 1, (void *)addr); v = t; }
        else if (n == 2) { __u16 t = 0; bpf_probe_read_user(&t, 2, (void *)addr); v = t; }
        else if (n == 4) { u32 t = 0; bpf_probe_read_user(&t, 4, (void *)addr); v = t; }
        else bpf_probe_read_user(&v, 8, (void *)addr);
    }
    switch (a->size) {
    case 1: return a->is_signed ? (u64)(s64)(__s8)v : (u64)(u8)v;
    case 2: return a->is_signed ? (u64)(s64)(__s16)v : (u64)(__u16)v;
    case 4: return a->is_signed ? (u64)(s64)(__s32)v : (u64)(u32)v;
    }
    return v;
}

/* The slot's key: from its argument where it has one. */
static __always_inline void key_of(struct pt_regs *ctx, struct skey *k, struct slot_cfg *c,
                                   u32 at) {
    if (c && c->arg && at != NO_ARGS)
        key_from_value(k, read_arg(ctx, at), c->arg_type, PT_REGS_IP(ctx));
}

SEC("uprobe") int usdt_count(struct pt_regs *ctx) {
    u64 cookie = bpf_get_attach_cookie(ctx);
    u32 slot = (u32)cookie;
    if (!theirs() || gated(slot)) return 0;
    struct skey k = {};
    k.slot = slot;
    key_of(ctx, &k, slot_of(slot), cookie >> 32);
    record(&k, 0, 0, 0);
    return 0;
}

SEC("uprobe") int usdt_begin(struct pt_regs *ctx) {
    u64 cookie = bpf_get_attach_cookie(ctx);
    struct skey k = {};
    k.slot = (u32)cookie;
    struct slot_cfg *c = slot_of(k.slot);
    if (!c) return 0;
    key_of(ctx, &k, c, cookie >> 32);
    return push_frame(c->chain, &k, 0);
}

SEC("uprobe") int usdt_end(struct pt_regs *ctx) {
    struct slot_cfg *c = slot_of((u32)bpf_get_attach_cookie(ctx));
    if (!c) return 0;
    return pop_frame_as(c->chain, NO_SLOT, 0, 0, 0, 0, 0);
}

/* The device layers' sites: (records, their number), or (a name, its hits). Asked first:
 * a gated site or another user's process costs no reads. The slot's config, and where
 * its two arguments are (*AT), or 0. */
static __always_inline struct slot_cfg *hand_over(struct pt_regs *ctx, u32 *at) {
    u64 cookie = bpf_get_attach_cookie(ctx);
    struct slot_cfg *c = slot_of((u32)cookie);
    *at = cookie >> 32;
    if (!c || *at == NO_ARGS || !theirs() || gated(c->row)) return 0;
    return c;
}

SEC("uprobe") int usdt_batch(struct pt_regs *ctx) {
    u32 at;
    struct slot_cfg *c = hand_over(ctx, &at);
    if (!c) return 0;
    u64 p = read_arg(ctx, at), n = read_arg(ctx, at + 1);
    return file_batch(ctx, c->row, p, n);
}

SEC("uprobe") int usdt_add(struct pt_regs *ctx) {
    u32 at;
    struct slot_cfg *c = hand_over(ctx, &at);
    if (!c) return 0;
    u64 name = read_arg(ctx, at), hits = read_arg(ctx, at + 1);
    struct skey k = {};
    k.slot = c->row;
    key_from_value(&k, name, c->arg_type, PT_REGS_IP(ctx));
    add_count(&k, hits);
    return 0;
}

/* A device layer's name(key, whole) site: a name longer than a key (its first bytes and
 * a hash: layer_common.h's key_text), told whole once. Kept here, by its key, for user
 * space to show the whole name (so that a process gone meanwhile keeps it too). */
#define WHOLE_LEN 256   /* bpf/program.py's WHOLE_LEN: a longer name is cut, never wrong */
struct whole { char s[WHOLE_LEN]; };
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, char[KEYLEN]); __type(value, struct whole);
         __uint(max_entries, 1); } names SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __type(key, u32); __type(value, struct whole);
         __uint(max_entries, 1); } whole_scratch SEC(".maps");

SEC("uprobe") int usdt_name(struct pt_regs *ctx) {
    u32 at;
    struct slot_cfg *c = hand_over(ctx, &at);
    if (!c) return 0;
    u64 key_at = read_arg(ctx, at), whole_at = read_arg(ctx, at + 1);
    char key[KEYLEN] = {};
    u32 zero = 0;
    struct whole *w = bpf_map_lookup_elem(&whole_scratch, &zero);
    if (!w || bpf_probe_read_user_str(key, sizeof(key), (void *)key_at) != KEYLEN) return 0;
    __builtin_memset(w->s, 0, sizeof(w->s));
    if (bpf_probe_read_user_str(w->s, sizeof(w->s), (void *)whole_at) <= KEYLEN) return 0;
    bpf_map_update_elem(&names, key, w, BPF_ANY);
    return 0;
}

