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

extern int LINUX_KERNEL_VERSION __kconfig;   /* libbpf's, from the running kernel */
#define TASKS_KERNEL(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#define TASK_RTLOCK_WAIT_BIT 0x1000   /* 5.15+ */
#define TASK_FROZEN_BIT 0x8000        /* 6.1+ */

/* What sched_switch's format reports as prev_state (__trace_sched_switch_state): 0 when
 * the thread was preempted or stays runnable, else its TASK_REPORT bits (0x30: dying).
 * Since 5.18 the tracepoint hands over the state __schedule read before a wakeup could
 * change it (ctx[3]); before, the task's own, as the format read it then. A frozen
 * thread (a suspended job's) or one waiting on an RT lock reports as uninterruptible. */
static __always_inline long switched_out_state(unsigned long long *ctx, _Bool preempt,
                                               struct task_struct *prev) {
    if (preempt) return 0;
    long state;
    if (LINUX_KERNEL_VERSION >= TASKS_KERNEL(5, 18, 0))
        state = (unsigned int)ctx[3];
    else if (bpf_core_field_exists(prev->__state))
        state = BPF_CORE_READ(prev, __state);
    else
        state = BPF_CORE_READ((struct task_struct___before_5_14 *)prev, state);
    if (state & (TASK_RTLOCK_WAIT_BIT | TASK_FROZEN_BIT)) state |= 0x2;
    return (state | BPF_CORE_READ(prev, exit_state)) & 0x7f;
}

#endif
