"""The kernel half of Python frames: at each sample (and each stack copy of a thread
leaving the CPU) of a process running a known CPython, the thread's frame chain is
walked from `_PyRuntime` and its code objects' addresses sent, leaf first, as one event
of their own just before the stack's (same thread, same time). Names are read later, by
the unwinder (names.py). Plain helpers and fixed-size maps: the C moves unchanged into a
precompiled program; the offsets come in a map, the fsbase offset from the kernel's BTF.

Each frame's address carries, in its top byte, what says where an evaluation loop (a
native `_PyEval_EvalFrameDefault`) began: 1 for every frame before 3.11, `is_entry` in
3.11, the frame's owner from 3.12 (a C-stack shim marks the loop's start): interleave.py
reads it, so the two stacks interleave.
"""

from __future__ import annotations

import ctypes
from typing import Any

from adaptyst_top.collectors.profile.python.detect import PythonProcess
from adaptyst_top.collectors.profile.python.offsets import OFFSETS

MAX_PY_FRAMES = 32  # deeper stacks keep their leaf-most 32 Python frames
MAX_THREADS = 16  # a process's threads walked to find the sampled one's state
VERSIONS = sorted(OFFSETS)
ENTRY_ALL, ENTRY_FLAG, ENTRY_SHIM = 0, 1, 2
SHIM_OWNER = 3  # FRAME_OWNED_BY_CSTACK (3.12, 3.13)

SOURCE = r"""
struct pyoffs { u64 interp_head; u64 tstate_head; u64 tstate_next; u64 tstate_tid;
                u64 tid_native; u64 tstate_frame; s64 cframe_frame; u64 frame_code;
                u64 frame_back; u64 entry_at; u64 entry_mode; };
struct pyproc { u64 runtime; u32 ver; u32 pad; };
struct pyevent { u32 pid; u32 tid; u64 ip; u64 sp; u64 bp; u64 t; u32 kind; u32 size;
                 u64 frames[%(frames)d]; };
BPF_ARRAY(pyoffs, struct pyoffs, %(versions)d);
BPF_HASH(pyproc, u32, struct pyproc, %(max_procs)d);
BPF_PERCPU_ARRAY(pyscratch, struct pyevent, 1);

/* An exec replaces the interpreter (a held command's launcher was a Python too): its
 * _PyRuntime is looked for again. */
TRACEPOINT_PROBE(sched, sched_process_exec) {
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    pyproc.delete(&pid);
    return 0;
}

static __always_inline u64 py_word(u64 addr) {
    u64 v = 0;
    bpf_probe_read_user(&v, sizeof(v), (void *)addr);
    return v;
}

static __always_inline void emit_py(u32 pid, u32 tid, u64 t) {
    struct pyproc *pp = pyproc.lookup(&pid);
    if (!pp) return;
    u32 ver = pp->ver;
    struct pyoffs *o = pyoffs.lookup(&ver);
    int zero = 0;
    struct pyevent *e = pyscratch.lookup(&zero);
    if (!o || !e) return;
    u64 want = tid;
    if (!o->tid_native) {  /* pthread_self(): the thread's fs base */
        if (%(fsbase)d < 0) return;
        want = 0;
        bpf_probe_read_kernel(&want, sizeof(want),
                              (void *)(bpf_get_current_task() + %(fsbase)d));
    }
    u64 interp = py_word(pp->runtime + o->interp_head);
    u64 ts = interp ? py_word(interp + o->tstate_head) : 0;
    u64 found = 0;
    for (int i = 0; i < %(threads)d && ts; i++) {
        if (py_word(ts + o->tstate_tid) == want) { found = ts; break; }
        ts = py_word(ts + o->tstate_next);
    }
    if (!found) return;
    u64 frame = py_word(found + o->tstate_frame);
    if (o->cframe_frame >= 0 && frame) frame = py_word(frame + o->cframe_frame);
    /* Each frame's code object, its entry byte (is_entry, or owner) in the top byte: no
     * branch on what was read, so the verifier walks the loop once per iteration. */
    u32 n = 0;
    for (int i = 0; i < %(frames)d; i++) {
        if (!frame) break;
        u64 code = py_word(frame + o->frame_code);
        u8 flag = 1;
        if (o->entry_mode != %(all)d)
            bpf_probe_read_user(&flag, 1, (void *)(frame + o->entry_at));
        e->frames[i & %(mask)d] = (code & 0x00ffffffffffffffULL) | ((u64)flag << 56);
        n = i + 1;
        frame = py_word(frame + o->frame_back);
    }
    /* ip: the version's index (the unwinder reads the names by its offsets). */
    e->pid = pid; e->tid = tid; e->ip = ver; e->sp = 0; e->bp = 0; e->t = t;
    e->kind = %(kind)d; e->size = (n & %(sizemask)d) * 8;
    u64 bytes = sizeof(*e) - sizeof(e->frames) + ((n & %(sizemask)d) * 8);
    if (bytes <= sizeof(*e)) send((struct event *)e, bytes);
}
"""


def program_part(kind: int, fsbase: int, max_procs: int) -> str:
    return SOURCE % {
        "frames": MAX_PY_FRAMES,
        "mask": MAX_PY_FRAMES - 1,
        "sizemask": 2 * MAX_PY_FRAMES - 1,
        "versions": len(VERSIONS),
        "max_procs": max_procs,
        "threads": MAX_THREADS,
        "fsbase": fsbase,
        "all": ENTRY_ALL,
        "shim": ENTRY_SHIM,
        "shim_owner": SHIM_OWNER,
        "kind": kind,
    }


def fill_offsets(table: Any) -> None:
    """The pyoffs map: one entry per CPython version offsets.py knows."""
    for i, version in enumerate(VERSIONS):
        o = OFFSETS[version]
        native = "tstate_native_thread_id" in o
        if "frame_owner" in o:
            mode, at = ENTRY_SHIM, o["frame_owner"]
        elif "frame_is_entry" in o:
            mode, at = ENTRY_FLAG, o["frame_is_entry"]
        else:
            mode, at = ENTRY_ALL, 0
        entry = table.Leaf(
            o["runtime_interp_head"],
            o["interp_tstate_head"],
            o["tstate_next"],
            o["tstate_native_thread_id"] if native else o["tstate_thread_id"],
            int(native),
            o["tstate_frame"],
            o["cframe_frame"],
            o["frame_code"],
            o["frame_back"],
            at,
            mode,
        )
        table[ctypes.c_int(i)] = entry


def register(table: Any, pid: int, found: PythonProcess) -> None:
    table[ctypes.c_uint(pid)] = table.Leaf(found.runtime, VERSIONS.index(found.version), 0)
