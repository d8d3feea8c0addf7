/* Generated from layouts.py (the one declaration both sides read): edit there, then
 *   python -m adaptyst_top.collectors.probes.bpf.layouts > structs.h
 * Included by module.h after KEYLEN, MAX_DEPTH and theirs.h. */
#ifndef ADAPTYST_STRUCTS_H
#define ADAPTYST_STRUCTS_H

/* Set before load (read-only data: the verifier prunes what a module does not use). oncpu: 1
 * to measure each call's on-CPU time; oncpu_at: task_struct's se.exec_start,
 * se.sum_exec_runtime side by side; keyed: 1 when a slot's key comes from slot_cfg;
 * by_process: 1 to keep each process's statistics apart (an MPI job's ranks). */
struct module_config {
    struct confine_config confine;
    u32 oncpu;
    u32 oncpu_at;
    u32 keyed;
    u32 by_process;
};
/* A statistics key: its slot, what it holds (KEY_*), a number or a string; the process it
 * counts (0: every process, unless cfg.by_process). */
struct skey { u32 slot; u32 kind; u64 num; char str[KEYLEN]; u32 pid; u32 pad; };
/* A key's statistics: calls, their total, least and most ns, on-CPU ns. */
struct stat { u64 count; u64 sum; u64 min; u64 max; u64 buckets; u64 oncpu; };
/* A histogram bucket's key. */
struct hkey { struct skey k; u32 bucket; u32 pad; };
/* A thread's stack of open calls, per chain. */
struct tkey { u64 tid; u32 chain; u32 pad; };
/* An open call. retimed: ts was taken again past a single-stepped entry
 * (kinds/uprobe.bpf.c). */
struct frame { u64 ts; u64 sp; u64 se[2]; u32 cpu; u32 retimed; struct skey k; };
/* A thread's open calls. */
struct stack { u32 depth; u32 over; struct frame f[MAX_DEPTH]; };
/* A slot: its @argN (0: none), how it is read, whether @retval; a USDT pair's chain, and the
 * slot whose row (keys, gate) its hits are filed under. */
struct slot_cfg { u32 arg; u32 arg_type; u32 retval; u32 chain; u32 row; u32 pad; };
/* One USDT argument's place (kinds/usdt.bpf.c). reg, base, index: byte offsets into struct
 * pt_regs (-1: none). */
struct arg_loc {
    u32 kind;
    u32 size;
    u32 is_signed;
    s32 reg;
    s32 base;
    s32 index;
    u32 scale;
    u32 pad;
    s64 disp;
    u64 value;
};

#endif
