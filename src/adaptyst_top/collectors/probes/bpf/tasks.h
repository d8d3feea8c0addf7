/* The scheduler's task as the follower's and the sampler's programs read it, at the
 * running kernel's offsets (CO-RE: relocated against its BTF at load).
 *
 * Why BTF tracepoints (tp_btf) and raw ones, not the perf-event kind: the kernel runs
 * at most 64 programs of that kind on one tracepoint, node-wide (BPF_TRACE_MAX_PROGS),
 * and every session's follower, profile and probe module took one of sched_switch's,
 * sched_process_fork's or sched_process_exit's: the 65th got E2BIG. These have no such
 * bound. */
#ifndef ADAPTYST_TASKS_H
#define ADAPTYST_TASKS_H

#include <bpf/bpf_core_read.h>

struct task_struct {
    int pid;                /* the thread's id */
    int exit_state;         /* EXIT_ZOMBIE, EXIT_DEAD */
    unsigned int __state;   /* since 5.14 */
} __attribute__((preserve_access_index));

struct task_struct___before_5_14 {
    long state;
} __attribute__((preserve_access_index));

/* What sched_switch's format reports as prev_state (__trace_sched_switch_state): 0 when
 * the thread was preempted or stays runnable, else its TASK_REPORT bits (0x30: dying). */
static __always_inline long switched_out_state(_Bool preempt, struct task_struct *prev) {
    if (preempt) return 0;
    long state;
    if (bpf_core_field_exists(prev->__state))
        state = BPF_CORE_READ(prev, __state);
    else
        state = BPF_CORE_READ((struct task_struct___before_5_14 *)prev, state);
    return (state | BPF_CORE_READ(prev, exit_state)) & 0x7f;
}

#endif
