/* The kernel half of a profile (sampler.py): on-CPU samples on every CPU and each
 * interval a thread spends off the CPU, of the processes in scope and those they start,
 * each with the thread's user registers and a copy of the top of its user stack, in one
 * ring buffer in the order the kernel made them. Compiled with the package; the
 * tasks' layouts are relocated against the running kernel's BTF at load (tasks.h). */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "../probes/bpf/theirs.h"
#include "../probes/bpf/tasks.h"

#define STACK 8192   /* sampler.STACK_BYTES */
/* Event kinds: sampler.ON_CPU, OFF_START, OFF_END, OFF_SUM, PY_FRAMES, RETURNS */
#define ON_CPU 0
#define OFF_START 1
#define OFF_END 2
#define OFF_SUM 3
#define PY_FRAMES 4
#define RETURNS 5
#define MAX_RETURNS 16   /* sampler.MAX_RETURNS */

struct sampler_config {
    struct confine_config confine;
    s64 fsbase;   /* task_struct's thread.fsbase (BTF), or -1: Python < 3.11 unnamed */
};
const volatile struct sampler_config cfg = {};


struct event { u32 pid; u32 tid; u64 ip; u64 sp; u64 bp; u64 t; u32 kind; u32 size;
               u8 stack[STACK]; };
struct head { u32 pid; u32 tid; u64 ip; u64 sp; u64 bp; u64 t; u32 kind; u32 size; };

/* max_entries of each hash and of the ring buffer are set before load. */
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __type(key, u32); __type(value, struct event);
         __uint(max_entries, 1); } scratch SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, u32); __type(value, u8);
         __uint(max_entries, 4096); } scope SEC(".maps");        /* processes (tgid) profiled */
/* A thread off the CPU now: when it left, whether it was preempted, and whether the
 * interval is summed here (in its `lastcopy`, charged to COPY: that copy's time, or 0
 * where the thread left from elsewhere) rather than sent. */
struct off { u64 left; u64 copy; u64 copy_of; u32 runnable; u32 summed; };
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, u32); __type(value, struct off);
         __uint(max_entries, 65536); } offstart SEC(".maps");    /* thread -> its interval */
/* Where a thread's stack was last copied (when, the user ip and sp it left from), and
 * its intervals since that left from the same place (or were preemptions from
 * elsewhere), summed: one OFF_SUM before its next copy, after a long one, or at its
 * exit, where they were two events each (a thread that sleeps 3,000 times a second cost
 * the monitor 18% of a core in them). Preallocated: nothing is allocated in the
 * scheduler's path. */
struct copy { u64 t; u64 ip; u64 sp; u64 blocked; u64 runnable; u64 elsewhere; u32 pid;
              u32 n; };
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, u32); __type(value, struct copy);
         __uint(max_entries, 65536); } lastcopy SEC(".maps");    /* thread -> its last stack copy */
struct sumevent { struct head h; u64 blocked; u64 runnable; u64 elsewhere; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, u64);
         __uint(max_entries, 1); } lost SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, u64);
         __uint(max_entries, 1); } gap SEC(".maps");  /* ns between two copies: 1 s / rate */
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 4096 * 4096); } events SEC(".maps");

static __always_inline int theirs(void) { return theirs_in(&cfg.confine); }


/* The reader is not woken per event (a wake-up each, ~300 a second from one sleepy
 * thread, was most of the monitor's CPU): it reads every READ_EVERY_MS (sampler.py),
 * or at once when a quarter of the buffer is full. */
static __always_inline void send(struct event *e, u32 size) {
    u64 wake = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >
                   bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 4
               ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
    if (bpf_ringbuf_output(&events, e, size, wake) != 0) {
        u32 zero = 0;
        u64 *n = bpf_map_lookup_elem(&lost, &zero);
        if (n) __sync_fetch_and_add(n, 1);
    }
}

#include "python/frames.bpf.h"

/* A function with a uretprobe on it returns to the kernel's trampoline: the probe put
 * the trampoline's address where the caller's was, and an unwinder stops there. The
 * kernel keeps each pending return's stack slot and the real address (the thread's
 * uprobe_task, newest first), and, while a probed instruction runs out of line in the
 * thread's slot of [uprobes], where it came from. These go just before the stack, as
 * Python's frames do, only when a return is pending or the thread is in its slot, so
 * that the unwinder can put the callers back (CO-RE: the kernel's own layouts). */
#define XOL_SLOT 128   /* unwind.XOL_SLOT_BYTES: x86's UPROBE_XOL_SLOT_BYTES */
struct return_instance {
    unsigned long stack;            /* where the return address lay */
    unsigned long orig_ret_vaddr;   /* the caller's address, before the probe's */
    struct return_instance *next;
} __attribute__((preserve_access_index));
struct uprobe_task {
    struct return_instance *return_instances;
    unsigned long vaddr;            /* the probed instruction being stepped */
    unsigned long xol_vaddr;        /* the thread's slot, where its copy runs */
} __attribute__((preserve_access_index));
struct task_struct___utask {
    struct uprobe_task *utask;      /* CONFIG_UPROBES */
} __attribute__((preserve_access_index));
struct task_struct___flags {
    unsigned int flags;             /* PF_* */
} __attribute__((preserve_access_index));
struct returns { struct head h; u64 slots[2 * MAX_RETURNS]; };
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __type(key, u32); __type(value, struct returns);
         __uint(max_entries, 1); } retscratch SEC(".maps");

#define TASK_TOP 0x00007ffffffff000ULL   /* x86-64's TASK_SIZE_MAX: user addresses below */
#define KERNEL_BOTTOM 0xffff800000000000ULL
#define PF_EXITING 0x4

static __always_inline void emit_returns(u32 pid, u32 tid, u64 t, u64 ip, u64 sp) {
    struct task_struct___utask *task = (void *)bpf_get_current_task();
    if (!bpf_core_field_exists(task->utask)) return;
    /* An exiting thread's uprobe_task is being freed (before 6.12 without RCU): never
     * walked then. Below, only user addresses near this thread's stack leave the kernel,
     * and the walk stops at a link that is no kernel pointer. */
    if (BPF_CORE_READ((struct task_struct___flags *)task, flags) & PF_EXITING) return;
    /* A read that fails (no uprobe_task: the thread never hit a uprobe) reads 0. */
    struct uprobe_task *ut = BPF_CORE_READ(task, utask);
    if (!ut) return;
    struct return_instance *ri = BPF_CORE_READ(ut, return_instances);
    u64 xol = BPF_CORE_READ(ut, xol_vaddr);
    int stepping = xol && ip - xol < XOL_SLOT;
    if (!ri && !stepping) return;
    if (xol && xol >= TASK_TOP) stepping = 0;
    u32 zero = 0;
    struct returns *e = bpf_map_lookup_elem(&retscratch, &zero);
    if (!e) return;
    u32 n = 0;
    for (int i = 0; i < MAX_RETURNS && ri; i++) {
        if ((u64)ri < KERNEL_BOTTOM) break;
        u64 slot = BPF_CORE_READ(ri, stack), back = BPF_CORE_READ(ri, orig_ret_vaddr);
        if (slot < sp || slot - sp >= STACK || back >= TASK_TOP) break;
        e->slots[2 * i] = slot;
        e->slots[2 * i + 1] = back;
        ri = BPF_CORE_READ(ri, next);
        n = i + 1;
    }
    e->h.pid = pid; e->h.tid = tid; e->h.t = t; e->h.bp = 0;
    u64 vaddr = stepping ? BPF_CORE_READ(ut, vaddr) : 0;
    if (vaddr >= TASK_TOP) vaddr = 0, xol = 0, stepping = 0;
    if (!n && !stepping) return;
    e->h.ip = vaddr; e->h.sp = stepping ? xol : 0;
    e->h.kind = RETURNS; e->h.size = (n & (2 * MAX_RETURNS - 1)) * 16;
    u64 bytes = sizeof(e->h) + ((n & (2 * MAX_RETURNS - 1)) * 16);
    if (bytes <= sizeof(*e)) send((struct event *)e, bytes);
}

/* The copy is tried at these sizes, largest first: a read that crosses the end of the
 * stack (the main thread's top lies a few KiB above a shallow sp) fails whole. */
#define COPY(n) if (bpf_probe_read_user(e->stack, n, (void *)e->sp) == 0) { \
        e->size = n; send(e, head + n); return 0; }

static __always_inline int emit(u32 kind, u64 t) {
    u32 zero = 0;
    struct event *e = bpf_map_lookup_elem(&scratch, &zero);
    if (!e) return 0;
    u64 id = bpf_get_current_pid_tgid();
    e->pid = id >> 32; e->tid = (u32)id; e->kind = kind; e->t = t;
    /* The user registers as the thread entered the kernel (an interrupt, a syscall). */
    struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    e->ip = regs->rip; e->sp = regs->rsp; e->bp = regs->rbp;
    u64 head = sizeof(*e) - STACK;
    COPY(8192) COPY(6144) COPY(4096) COPY(3072) COPY(2048) COPY(1024) COPY(512)
    e->size = 0;
    send(e, head);
    return 0;
}

SEC("perf_event")
int on_cpu(struct bpf_perf_event_data *ctx) {
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    if (!bpf_map_lookup_elem(&scope, &pid) || !theirs()) return 0;
    u64 t = bpf_ktime_get_ns();
    emit_py(pid, (u32)bpf_get_current_pid_tgid(), t);
    struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    emit_returns(pid, (u32)bpf_get_current_pid_tgid(), t, regs->rip, regs->rsp);
    return emit(ON_CPU, t);
}

/* C's summed intervals (thread TID's), sent and cleared (ip: the copy they are charged
 * to, sp: how many). */
static __always_inline void flush_sum(struct copy *c, u32 tid, u64 now) {
    if (!c->n) return;
    struct sumevent e = {};
    e.h.pid = c->pid; e.h.tid = tid; e.h.ip = c->t; e.h.sp = c->n; e.h.t = now;
    e.h.kind = OFF_SUM; e.h.size = 24;
    e.blocked = c->blocked; e.runnable = c->runnable; e.elsewhere = c->elsewhere;
    send((struct event *)&e, sizeof(e));
    c->n = 0; c->blocked = 0; c->runnable = 0; c->elsewhere = 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next_task) {
    u64 now = bpf_ktime_get_ns();
    u32 next = BPF_CORE_READ(next_task, pid);
    u32 zero = 0;
    u64 *g = bpf_map_lookup_elem(&gap, &zero);
    struct off *st = bpf_map_lookup_elem(&offstart, &next);
    if (st) {
        struct off o = *st;
        bpf_map_delete_elem(&offstart, &next);
        u64 ns = now - o.left;
        struct copy *c = o.summed ? bpf_map_lookup_elem(&lastcopy, &next) : 0;
        if (c && c->t == o.copy_of) {
            if (!o.copy) c->elsewhere += ns;
            else if (o.runnable) c->runnable += ns;
            else c->blocked += ns;
            /* Back from a long interval: said now, not at a next copy that may be far. */
            if (g && ns >= *g) flush_sum(c, next, now);
        } else {  /* its own copy's (or a sum with no copy left: on no stack) */
            struct head e = {};
            e.tid = next; e.t = o.summed ? 0 : o.left; e.ip = ns; e.sp = o.runnable;
            e.kind = OFF_END;
            send((struct event *)&e, sizeof(e));
        }
    }
    u64 id = bpf_get_current_pid_tgid();
    u32 pid = id >> 32, tid = (u32)id;
    if (!bpf_map_lookup_elem(&scope, &pid) || tid == 0 || !theirs()) return 0;
    long state = switched_out_state(ctx, preempt, prev);
    /* A dying thread's last switch (EXIT_DEAD, EXIT_ZOMBIE): it never comes back. */
    if (state & 0x30) return 0;
    /* No state bit (TASK_REPORT's 0x7f) set: preempted, reported as 0 or TASK_REPORT_MAX. */
    u32 runnable = (state & 0x7f) == 0;
    /* A thread that leaves the CPU more often than HZ times a second has its stack
     * copied at that rate. A switch-out between from the place of the last copy (the same
     * user ip and sp) is charged to that copy; a preemption from elsewhere to no stack:
     * both summed. A block from elsewhere is copied: a preempted leaf and a blocking
     * call of one thread within a period are two stacks, and the blocked time once went
     * to the leaf. An exiting thread (its last switches) is not summed: its sums would
     * outlive it. */
    struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    struct copy here = { .t = now, .ip = regs->rip, .sp = regs->rsp, .pid = pid };
    struct copy *last = bpf_map_lookup_elem(&lastcopy, &tid);
    int exiting = BPF_CORE_READ((struct task_struct___flags *)prev, flags) & PF_EXITING;
    if (last && g && now - last->t < *g && !exiting) {
        int same = last->ip == here.ip && last->sp == here.sp;
        if (same || runnable) {
            struct off o = { .left = now, .copy = same ? last->t : 0, .copy_of = last->t,
                             .runnable = runnable, .summed = 1 };
            last->n++;
            bpf_map_update_elem(&offstart, &tid, &o, BPF_ANY);
            return 0;
        }
    }
    if (last) flush_sum(last, tid, now);  /* before the copy that ends what it was charged to */
    struct off o = { .left = now, .runnable = runnable };
    bpf_map_update_elem(&offstart, &tid, &o, BPF_ANY);
    bpf_map_update_elem(&lastcopy, &tid, &here, BPF_ANY);
    emit_py(pid, tid, now);
    emit_returns(pid, tid, now, here.ip, here.sp);
    return emit(OFF_START, now);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent_task, struct task_struct *child_task) {
    u32 parent = bpf_get_current_pid_tgid() >> 32;
    if (!bpf_map_lookup_elem(&scope, &parent)) return 0;
    u32 child = BPF_CORE_READ(child_task, pid);
    u8 one = 1;
    bpf_map_update_elem(&scope, &child, &one, BPF_ANY);
    return 0;
}

SEC("raw_tp/sched_process_exit")
int on_exit(void *args) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    /* Only its own process's thread: a thread number another took since (another
    user's) says nothing of this profile. */
    struct copy *c = bpf_map_lookup_elem(&lastcopy, &tid);
    if (c && c->pid == (u32)(bpf_get_current_pid_tgid() >> 32))
        flush_sum(c, tid, bpf_ktime_get_ns());
    bpf_map_delete_elem(&offstart, &tid);
    bpf_map_delete_elem(&lastcopy, &tid);
    /* A process's entry, or a thread's that fork added (its tid): nothing keeps either. */
    bpf_map_delete_elem(&scope, &tid);
    bpf_map_delete_elem(&pyexecs, &tid);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
