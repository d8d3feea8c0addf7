/* The kernel half of Python frames (sampler_py.py says what and why): a process running
 * a known CPython has its thread's frame chain walked from _PyRuntime at each sample and
 * stack copy, and its code objects' addresses sent, leaf first, just before the stack.
 * The offsets per version come in pyoffs; the fs base's offset in cfg (BTF). */
#ifndef ADAPTYST_PY_FRAMES_H
#define ADAPTYST_PY_FRAMES_H

#define MAX_PY_FRAMES 32    /* sampler_py.MAX_PY_FRAMES */
#define PY_MAX_THREADS 16   /* sampler_py.MAX_THREADS */
#define PY_VERSIONS 16      /* at least len(sampler_py.VERSIONS): set before load */
#define ENTRY_ALL 0         /* sampler_py.ENTRY_ALL */

struct pyoffs { u64 interp_head; u64 tstate_head; u64 tstate_next; u64 tstate_tid;
                u64 tid_native; u64 tstate_frame; s64 cframe_frame; u64 frame_code;
                u64 frame_back; u64 entry_at; u64 entry_mode; };
struct pyproc { u64 runtime; u32 ver; u32 pad; };
struct pyevent { u32 pid; u32 tid; u64 ip; u64 sp; u64 bp; u64 t; u32 kind; u32 size;
                 u64 frames[MAX_PY_FRAMES]; };

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, u32); __type(value, struct pyoffs);
         __uint(max_entries, PY_VERSIONS); } pyoffs SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, u32); __type(value, struct pyproc);
         __uint(max_entries, 4096); } pyproc SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __type(key, u32); __type(value, struct pyevent);
         __uint(max_entries, 1); } pyscratch SEC(".maps");
/* Execs of a process in scope so far: user space reads it before it looks a process up
 * and again after it registered it, so that an exec in between (which found the old
 * image) never leaves the old interpreter's _PyRuntime on the new one. */
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, u32); __type(value, u64);
         __uint(max_entries, 4096); } pyexecs SEC(".maps");

/* An exec replaces the interpreter (a held command's launcher was a Python too): its
 * _PyRuntime is looked for again. */
SEC("raw_tp/sched_process_exec")
int py_exec(void *args) {
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    bpf_map_delete_elem(&pyproc, &pid);
    if (!bpf_map_lookup_elem(&scope, &pid)) return 0;
    u64 *n = bpf_map_lookup_elem(&pyexecs, &pid);
    if (n) { __sync_fetch_and_add(n, 1); return 0; }
    u64 one = 1;
    bpf_map_update_elem(&pyexecs, &pid, &one, BPF_NOEXIST);
    return 0;
}

static __always_inline u64 py_word(u64 addr) {
    u64 v = 0;
    bpf_probe_read_user(&v, sizeof(v), (void *)addr);
    return v;
}

static __always_inline void emit_py(u32 pid, u32 tid, u64 t) {
    struct pyproc *pp = bpf_map_lookup_elem(&pyproc, &pid);
    if (!pp) return;
    u32 ver = pp->ver;
    struct pyoffs *o = bpf_map_lookup_elem(&pyoffs, &ver);
    u32 zero = 0;
    struct pyevent *e = bpf_map_lookup_elem(&pyscratch, &zero);
    if (!o || !e) return;
    u64 want = tid;
    if (!o->tid_native) {  /* pthread_self(): the thread's fs base */
        if (cfg.fsbase < 0) return;
        want = 0;
        bpf_probe_read_kernel(&want, sizeof(want), (void *)(bpf_get_current_task() + cfg.fsbase));
    }
    u64 interp = py_word(pp->runtime + o->interp_head);
    u64 ts = interp ? py_word(interp + o->tstate_head) : 0;
    u64 found = 0;
    for (int i = 0; i < PY_MAX_THREADS && ts; i++) {
        if (py_word(ts + o->tstate_tid) == want) { found = ts; break; }
        ts = py_word(ts + o->tstate_next);
    }
    if (!found) return;
    u64 frame = py_word(found + o->tstate_frame);
    if (o->cframe_frame >= 0 && frame) frame = py_word(frame + o->cframe_frame);
    /* Each frame's code object, its entry byte (is_entry, or owner) in the top byte. */
    u32 n = 0;
    for (int i = 0; i < MAX_PY_FRAMES; i++) {
        if (!frame) break;
        u64 code = py_word(frame + o->frame_code);
        u8 flag = 1;
        if (o->entry_mode != ENTRY_ALL)
            bpf_probe_read_user(&flag, 1, (void *)(frame + o->entry_at));
        e->frames[i & (MAX_PY_FRAMES - 1)] = (code & 0x00ffffffffffffffULL) | ((u64)flag << 56);
        n = i + 1;
        frame = py_word(frame + o->frame_back);
    }
    /* ip: the version's index (the unwinder reads the names by its offsets). */
    e->pid = pid; e->tid = tid; e->ip = ver; e->sp = 0; e->bp = 0; e->t = t;
    e->kind = PY_FRAMES; e->size = (n & (2 * MAX_PY_FRAMES - 1)) * 8;
    u64 bytes = sizeof(*e) - sizeof(e->frames) + ((n & (2 * MAX_PY_FRAMES - 1)) * 8);
    if (bytes <= sizeof(*e)) send((struct event *)e, bytes);
}

#endif
