"""The kernel half of a profile: on-CPU samples at HZ on every CPU, and each interval a
thread spends off the CPU, of the processes in scope (and those they start), each with
the thread's user registers and a copy of the top of its user stack.

One BPF ring buffer carries every event in the order the kernel made them, so a
thread's switch-out (its stack) always comes before its switch-in (how long it was off).
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from adaptyst_top.collectors.probes.bcc_extras import bcc_stderr_captured
from adaptyst_top.collectors.probes.compile_turns import COMPILE_TURNS
from adaptyst_top.collectors.probes.confinement import Confinement, theirs_source
from adaptyst_top.collectors.probes.overhead import prog_run_stats
from adaptyst_top.collectors.profile.python.detect import find_python
from adaptyst_top.collectors.profile.python.sampler_py import (
    MAX_PY_FRAMES,
    fill_offsets,
    register,
)
from adaptyst_top.collectors.profile.python.sampler_py import program_part as python_part

STACK_BYTES = 8192  # perf record --call-graph dwarf's default copy, for comparison
# The copy is tried at these sizes, largest first: a read that crosses the end of the
# stack (the main thread's top lies a few KiB above a shallow sp) fails whole.
_SIZES = (8192, 6144, 4096, 3072, 2048, 1024, 512, 0)
PY_RECHECK_S = 0.2
PY_EXEC_CHECK_S = 0.5  # a process found running Python: whether an exec undid that
MAX_PY_WATCHED = 4096
RING_PAGES = 1024  # 4 MiB: ~500 full events between two polls
ON_CPU, OFF_START, OFF_END, OFF_SAME, PY_FRAMES = 0, 1, 2, 3, 4
_HEAD = struct.Struct("<IIQQQQII")  # pid tid ip sp bp t kind size
HEADER_BYTES = _HEAD.size

_SOURCE = r"""
#include <uapi/linux/ptrace.h>
#include <uapi/linux/bpf_perf_event.h>
#include <linux/sched.h>

struct event { u32 pid; u32 tid; u64 ip; u64 sp; u64 bp; u64 t; u32 kind; u32 size;
               u8 stack[%(stack)d]; };
BPF_PERCPU_ARRAY(scratch, struct event, 1);
BPF_HASH(scope, u32, u8, %(max_procs)d);        /* processes (tgid) profiled */
BPF_HASH(offstart, u32, u64, %(max_threads)d);  /* thread -> when it left the CPU << 1 | runnable */
BPF_HASH(lastcopy, u32, u64, %(max_threads)d);  /* thread -> its last off-CPU stack copy */
BPF_ARRAY(lost, u64, 1);
BPF_ARRAY(gap, u64, 1);  /* ns between two stack copies of a thread: 1 s / the rate */
BPF_RINGBUF_OUTPUT(events, %(pages)d);
%(theirs)s
static __always_inline void send(struct event *e, u32 size) {
    if (events.ringbuf_output(e, size, 0) != 0) {
        int zero = 0;
        u64 *n = lost.lookup(&zero);
        if (n) __sync_fetch_and_add(n, 1);
    }
}

%(python)s

static __always_inline int emit(u32 kind, u64 t) {
    int zero = 0;
    struct event *e = scratch.lookup(&zero);
    if (!e) return 0;
    u64 id = bpf_get_current_pid_tgid();
    e->pid = id >> 32; e->tid = (u32)id; e->kind = kind; e->t = t;
    /* The user registers as the thread entered the kernel (an interrupt, a syscall). */
    struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(
        (struct task_struct *)bpf_get_current_task_btf());
    e->ip = regs->ip; e->sp = regs->sp; e->bp = regs->bp;
    u64 head = sizeof(*e) - %(stack)d;
%(copies)s
    return 0;
}

int on_cpu(struct bpf_perf_event_data *ctx) {
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    if (!scope.lookup(&pid) || !theirs()) return 0;
    u64 t = bpf_ktime_get_ns();
    emit_py(pid, (u32)bpf_get_current_pid_tgid(), t);
    return emit(%(on)d, t);
}

TRACEPOINT_PROBE(sched, sched_switch) {
    u64 now = bpf_ktime_get_ns();
    u32 next = args->next_pid;
    u64 *st = offstart.lookup(&next);
    if (st) {
        u64 v = *st;
        offstart.delete(&next);
        struct { u32 pid; u32 tid; u64 ip; u64 sp; u64 bp; u64 t; u32 kind; u32 size; } e = {};
        e.tid = next; e.t = v >> 1; e.ip = now - (v >> 1); e.sp = v & 1; e.kind = %(end)d;
        send((struct event *)&e, sizeof(e));
    }
    u64 id = bpf_get_current_pid_tgid();
    u32 pid = id >> 32, tid = (u32)id;
    if (!scope.lookup(&pid) || tid == 0 || !theirs()) return 0;
    /* A dying thread's last switch (EXIT_DEAD, EXIT_ZOMBIE): it never comes back. */
    if (args->prev_state & 0x30) return 0;
    /* No state bit (TASK_REPORT's 0x7f) set: preempted, reported as 0 or TASK_REPORT_MAX. */
    u64 v = (now << 1) | ((args->prev_state & 0x7f) == 0 ? 1 : 0);
    offstart.update(&tid, &v);
    /* A thread that leaves the CPU more often than HZ times a second has its stack
     * copied at that rate: the switch-outs between say "where it last was". */
    u64 *last = lastcopy.lookup(&tid);
    int zero = 0;
    u64 *g = gap.lookup(&zero);
    if (last && g && now - *last < *g) {
        struct { u32 pid; u32 tid; u64 ip; u64 sp; u64 bp; u64 t; u32 kind; u32 size; } e = {};
        e.pid = pid; e.tid = tid; e.t = now; e.kind = %(same)d;
        send((struct event *)&e, sizeof(e));
        return 0;
    }
    lastcopy.update(&tid, &now);
    emit_py(pid, tid, now);
    return emit(%(start)d, now);
}

TRACEPOINT_PROBE(sched, sched_process_fork) {
    u32 parent = bpf_get_current_pid_tgid() >> 32;
    if (!scope.lookup(&parent)) return 0;
    u32 child = args->child_pid;
    u8 one = 1;
    scope.update(&child, &one);
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exit) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id;
    offstart.delete(&tid);
    lastcopy.delete(&tid);
    /* A process's entry, or a thread's that fork added (its tid): nothing keeps either. */
    scope.delete(&tid);
    return 0;
}
"""


def _copies(stack: int) -> str:
    out = []
    for i, size in enumerate(s for s in _SIZES if s <= stack):
        cond = "if" if i == 0 else "else if"
        read = f"bpf_probe_read_user(e->stack, {size}, (void *)e->sp) == 0" if size else "1"
        out.append(f"    {cond} ({read}) {{ e->size = {size}; send(e, head + {size}); }}")
    return "\n".join(out)


def program_source(
    hz: int,
    stack: int = STACK_BYTES,
    max_procs: int = 4096,
    confine: Confinement | None = None,
    fsbase: int = -1,
) -> str:
    """CONFINE: a thread is seen only while it is that user's (agent-served sessions: a
    setuid exec of a process in scope, or one made undumpable, is never sampled).
    FSBASE: where task_struct keeps a thread's fs base (-1: unknown; Python before 3.11
    then shows no Python frames: its threads are known by pthread_self())."""
    return _SOURCE % {
        "python": python_part(PY_FRAMES, fsbase, max_procs),
        "theirs": theirs_source(confine),
        "same": OFF_SAME,
        "stack": stack,
        "copies": _copies(stack),
        "max_procs": max_procs,
        "max_threads": 65536,
        "pages": RING_PAGES,
        "on": ON_CPU,
        "start": OFF_START,
        "end": OFF_END,
    }


@dataclass(frozen=True, slots=True)
class Event:
    """ON_CPU: a sample. OFF_START: the thread left the CPU at T (its stack then);
    OFF_SAME: it left at T, where it last left with a stack (copied at most HZ a second).
    OFF_END: thread TID, off since T, came back after OFF_NS (RUNNABLE: it was preempted,
    not blocked)."""

    kind: int
    pid: int
    tid: int
    t: int
    ip: int = 0
    sp: int = 0
    bp: int = 0
    stack: bytes = b""
    off_ns: int = 0
    runnable: bool = False
    py: tuple[int, ...] = ()  # PY_FRAMES: code objects' addresses, leaf first (bit 0: entry)


def encode(e: Event) -> bytes:
    """E as the kernel wrote it (decode's inverse): how the agent hands it over."""
    if e.kind == OFF_END:
        return _HEAD.pack(0, e.tid, e.off_ns, int(e.runnable), 0, e.t, e.kind, 0)
    if e.kind == PY_FRAMES:
        frames = e.py[:MAX_PY_FRAMES]
        head = _HEAD.pack(e.pid, e.tid, e.ip, 0, 0, e.t, e.kind, 8 * len(frames))
        return head + struct.pack(f"<{len(frames)}Q", *frames)
    return _HEAD.pack(e.pid, e.tid, e.ip, e.sp, e.bp, e.t, e.kind, len(e.stack)) + e.stack


def decode(data: bytes) -> Event | None:
    if len(data) < _HEAD.size:
        return None
    pid, tid, ip, sp, bp, t, kind, size = _HEAD.unpack_from(data)
    if kind == OFF_END:
        return Event(kind, 0, tid, t, off_ns=ip, runnable=bool(sp))
    if kind == PY_FRAMES:
        n = min(size, len(data) - _HEAD.size, 8 * MAX_PY_FRAMES) // 8
        frames = struct.unpack_from(f"<{n}Q", data, _HEAD.size)
        return Event(kind, pid, tid, t, ip, py=frames)  # ip: the CPython version's index
    stack = data[_HEAD.size : _HEAD.size + min(size, STACK_BYTES)]
    return Event(kind, pid, tid, t, ip, sp, bp, bytes(stack))


def _fsbase() -> int:
    """Where this kernel keeps a thread's fs base in its task_struct (its BTF), or -1."""
    from adaptyst_top.collectors.probes.kernel_btf import BTFError, member_offset

    try:
        return member_offset("task_struct", "thread") + member_offset("thread_struct", "fsbase")
    except (BTFError, OSError, ValueError):
        return -1


class Sampler:
    """Attached from construction to close(); `poll()` hands each event to ON_EVENT."""

    def __init__(
        self,
        pids: Iterable[int],
        hz: int,
        on_event: Callable[[Event], None],
        confine: Confinement | None = None,
        owner: Hashable = None,
    ) -> None:
        from bcc import BPF, PerfSWConfig, PerfType  # type: ignore[import-not-found]

        self.hz = hz
        self._on_event = on_event
        self._lock = threading.Lock()
        # bcc's compiler is one at a time in a process (the agent's users take turns);
        # the sched tracepoints attach here.
        with COMPILE_TURNS.turn(owner), bcc_stderr_captured():
            self.bpf = BPF(text=program_source(hz, confine=confine, fsbase=_fsbase()))
        # process -> (when to look again, the wait after that, whether it was found)
        self._pythons: dict[int, tuple[float, float, bool]] = {}
        try:
            fill_offsets(self.bpf["pyoffs"])
            scope = self.bpf["scope"]
            for pid in pids:
                scope[ctypes.c_uint(pid)] = ctypes.c_ubyte(1)
            self.bpf["events"].open_ring_buffer(self._take)
            self._clock = {"ev_type": PerfType.SOFTWARE, "ev_config": PerfSWConfig.CPU_CLOCK}
            self._attach(hz)
        except Exception:
            self._cleanup()
            raise
        self.closed = False
        self._lost = 0

    # add, drop, set_hz, lost and run_ns come from other threads than close (a job's
    # watch, the agent's guard, a snapshot): each holds the lock, and close marks the
    # sampler closed under it before the module goes, so none reaches a closed module.

    def add(self, pid: int) -> bool:
        """Sample PID too; False when closed, or the map of processes is full."""
        with self._lock:
            if self.closed:
                return False
            try:
                self.bpf["scope"][ctypes.c_uint(pid)] = ctypes.c_ubyte(1)
            except Exception:  # bcc raises plain Exception on a full map
                return False
            return True

    def _attach(self, hz: int) -> None:
        # Every CPU, filtered by process in the program: a thread that moves or is
        # started later is sampled with no new event to open.
        self.bpf["gap"][ctypes.c_int(0)] = ctypes.c_uint64(1_000_000_000 // hz)
        self.bpf.attach_perf_event(**self._clock, fn_name="on_cpu", sample_freq=hz)
        self.hz = hz

    def set_hz(self, hz: int) -> None:
        """Sample at HZ from now on (the budget lowers the rate): the clock's events are
        opened again at that frequency."""
        with self._lock:
            if not self.closed and hz != self.hz:
                self.bpf.detach_perf_event(**self._clock)
                self._attach(hz)

    def drop(self, pid: int) -> None:
        """PID is sampled no more (its threads' entries go as they exit)."""
        with self._lock:
            if not self.closed:
                with contextlib.suppress(KeyError):
                    del self.bpf["scope"][ctypes.c_uint(pid)]

    def _take(self, _ctx: object, data: int, size: int) -> None:
        event = decode(ctypes.string_at(data, size))
        if event is not None:
            if event.kind in (ON_CPU, OFF_START):
                self._python(event.pid)
            self._on_event(event)

    def _registered(self, pid: int) -> bool:
        with self._lock:
            if self.closed:
                return True
            try:
                self.bpf["pyproc"][ctypes.c_uint(pid)]
            except KeyError:
                return False
            return True

    def _python(self, pid: int) -> None:
        """Whether PID runs a CPython whose frames the kernel can walk: looked at when
        first seen and again, from PY_RECHECK_S on, ever less often, until it does (a launched command execs
        its interpreter after it was put in scope; a program may load libpython late)."""
        now = time.monotonic()
        due, wait, found_before = self._pythons.get(pid, (0.0, PY_RECHECK_S, False))
        if now < due:
            return
        if found_before:
            # Its entry stays in the kernel until an exec deletes it (another program,
            # or the same one started again, whose _PyRuntime may lie elsewhere).
            if self._registered(pid):
                self._pythons[pid] = (now + PY_EXEC_CHECK_S, wait, True)
                return
            wait = PY_RECHECK_S
        if len(self._pythons) >= MAX_PY_WATCHED:
            self._pythons.pop(next(iter(self._pythons)))
        found = find_python(pid)
        # Not yet: again after a wait that doubles (a launched command's exec comes soon;
        # a process that never runs Python costs ever less).
        if found is None:
            self._pythons[pid] = (now + wait, min(2 * wait, 5.0), False)
            return
        self._pythons[pid] = (now + PY_EXEC_CHECK_S, wait, True)
        if found is not None:
            with self._lock, contextlib.suppress(Exception):  # a full map: no Python frames
                if not self.closed:
                    register(self.bpf["pyproc"], pid, found)

    def poll(self, timeout_ms: int = 0) -> None:
        self.bpf.ring_buffer_poll(timeout_ms)

    @property
    def lost(self) -> int:
        """Events dropped for a full ring buffer (the count as it was at close, after)."""
        with self._lock:
            if not self.closed:
                self._lost = int(self.bpf["lost"][ctypes.c_int(0)].value)
            return self._lost

    def run_ns(self) -> tuple[float | None, float | None]:
        """Mean kernel time of one run of the sampling program and of the switch program
        (which runs at every context switch on the node), from their run-time statistics
        (None until they were sampled: overhead.BpfStats)."""
        out: list[float | None] = []
        with self._lock:
            for name in ("on_cpu", "tracepoint__sched__sched_switch"):
                f = self.bpf.funcs.get(name.encode()) if not self.closed else None
                run_ns, run_cnt = prog_run_stats(f.fd) if f is not None else (0, 0)
                out.append(run_ns / run_cnt if run_cnt else None)
        return out[0], out[1]

    def close(self) -> None:
        _ = self.lost
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._cleanup()

    def _cleanup(self) -> None:
        with COMPILE_TURNS.teardown(), contextlib.suppress(Exception):
            self.bpf.cleanup()
