/* Following a target's children (process_follow.py): the followed processes in a map,
 * a child of one followed in the kernel at once, and each fork, exec and exit of one
 * told to user space through a ring buffer. The task's layout is relocated against
 * the running kernel's BTF (CO-RE) when loaded (tasks.h). */
#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "theirs.h"
#include "tasks.h"

/* max_entries is set before load (process_follow.MAX_FOLLOWED). */
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, u32); __type(value, u8);
         __uint(max_entries, 1); } followed SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 16 * 4096); } events SEC(".maps");

struct event { u32 kind; u32 pid; u32 parent; };

static __always_inline void tell(u32 kind, u32 pid, u32 parent) {
    struct event e = {kind, pid, parent};
    bpf_ringbuf_output(&events, &e, sizeof(e), 0);
}

/* In the parent's context: a new thread of a followed process lands here too, and is
 * followed (harmless: user space drops what is not a process). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct *parent_task, struct task_struct *child_task) {
    u32 parent = bpf_get_current_pid_tgid() >> 32;
    if (!bpf_map_lookup_elem(&followed, &parent)) return 0;
    u32 child = BPF_CORE_READ(child_task, pid);
    u8 one = 1;
    bpf_map_update_elem(&followed, &child, &one, BPF_ANY);
    tell(0, child, parent);
    return 0;
}

SEC("raw_tp/sched_process_exec")
int follow_exec(void *args) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (bpf_map_lookup_elem(&followed, &tgid)) tell(1, tgid, 0);
    return 0;
}

SEC("raw_tp/sched_process_exit")
int follow_exit(void *args) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = id, tgid = id >> 32;
    if (!bpf_map_lookup_elem(&followed, &tid)) return 0;
    bpf_map_delete_elem(&followed, &tid);
    if (tid == tgid) tell(2, tgid, 0);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
