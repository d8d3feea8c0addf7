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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.probes.bpf.libbpf import BpfObject
from adaptyst_top.collectors.probes.cost.overhead import prog_run_stats
from adaptyst_top.collectors.probes.safety.confinement import (
    ConfineConfig,
    Confinement,
    confine_config,
)
from adaptyst_top.collectors.profile.python.detect import find_python
from adaptyst_top.collectors.profile.python.sampler_py import MAP_TYPES as PY_MAP_TYPES
from adaptyst_top.collectors.profile.python.sampler_py import (
    MAX_PY_FRAMES,
    fill_offsets,
    register,
)
from adaptyst_top.collectors.profile.python.sampler_py import VERSIONS as PY_VERSIONS

STACK_BYTES = 8192  # perf record --call-graph dwarf's default copy, for comparison
PY_RECHECK_S = 0.2
PY_EXEC_CHECK_S = 0.5  # a process found running Python: whether an exec undid that
MAX_PY_WATCHED = 4096
RING_PAGES = 1024  # 4 MiB: ~500 full events between two polls
# The reader reads this often (the kernel wakes it only when a quarter of the buffer is
# full): a process of 30 ms is mostly still there to have its maps read.
READ_EVERY_MS = 20
ON_CPU, OFF_START, OFF_END, OFF_SUM, PY_FRAMES, RETURNS = 0, 1, 2, 3, 4, 5
_SUMS = struct.Struct("<QQQ")  # OFF_SUM's: blocked, runnable, elsewhere ns
MAX_RETURNS = 16  # pending uretprobe returns sent per stack (the innermost)
_HEAD = struct.Struct("<IIQQQQII")  # pid tid ip sp bp t kind size
HEADER_BYTES = _HEAD.size

# The program (sampler.bpf.c, with python/frames.bpf.h), compiled with the package.
_OBJECT = Path(__file__).resolve().parent / "sampler.bpf.o"
_PROGRAMS = ("on_cpu", "on_switch", "on_fork", "on_exit", "py_exec")
MAX_PROCS = 4096
_MAP_TYPES: dict[str, tuple[Any, Any]] = {
    "scope": (ctypes.c_uint32, ctypes.c_uint8),
    "lost": (ctypes.c_uint32, ctypes.c_uint64),
    "gap": (ctypes.c_uint32, ctypes.c_uint64),
    "pyexecs": (ctypes.c_uint32, ctypes.c_uint64),
    **PY_MAP_TYPES,
}


class SamplerConfig(ctypes.Structure):
    """`struct sampler_config` of sampler.bpf.c."""

    _fields_ = [("confine", ConfineConfig), ("fsbase", ctypes.c_int64)]


def load_program(confine: Confinement | None, fsbase: int) -> BpfObject:
    """The sampler's object, sized and told whose threads count, loaded (not attached).
    CONFINE: a thread is seen only while it is that user's (agent-served sessions: a
    setuid exec of a process in scope, or one made undumpable, is never sampled).
    FSBASE: where task_struct keeps a thread's fs base (-1: unknown; Python before 3.11
    then shows no Python frames: its threads are known by pthread_self())."""
    obj = BpfObject(str(_OBJECT), _PROGRAMS, _MAP_TYPES)
    try:
        obj.size_map("scope", MAX_PROCS)
        obj.size_map("pyproc", MAX_PROCS)
        obj.size_map("pyexecs", MAX_PROCS)
        obj.size_map("pyoffs", len(PY_VERSIONS))
        obj.size_map("events", RING_PAGES * 4096)
        obj.set_rodata(bytes(SamplerConfig(confine_config(confine), fsbase)))
        obj.select(dict.fromkeys(_PROGRAMS))
        obj.load()
    except BaseException:
        obj.cleanup()
        raise
    return obj


@dataclass(frozen=True, slots=True)
class Event:
    """ON_CPU: a sample. OFF_START: the thread left the CPU at T (its stack then).
    OFF_END: thread TID, off since T, came back after OFF_NS (RUNNABLE: it was preempted,
    not blocked); T 0: its stack unknown.
    OFF_SUM: SP intervals summed in the kernel since the copy at IP (copied at most HZ a
    second from one place: the same user ip and sp): SUMS, blocked and runnable ns there,
    and runnable ns of preemptions from elsewhere (on no stack)."""

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
    # RETURNS: the thread's pending uretprobe returns, newest first: (the stack slot
    # where the return address lay, the caller's address the trampoline stands for); IP
    # and SP: the probed instruction it steps out of line and where (0 when none)
    returns: tuple[tuple[int, int], ...] = ()
    sums: tuple[int, int, int] = (0, 0, 0)


def encode(e: Event) -> bytes:
    """E as the kernel wrote it (decode's inverse): how the agent hands it over."""
    if e.kind == OFF_END:
        return _HEAD.pack(0, e.tid, e.off_ns, int(e.runnable), 0, e.t, e.kind, 0)
    if e.kind == PY_FRAMES:
        frames = e.py[:MAX_PY_FRAMES]
        head = _HEAD.pack(e.pid, e.tid, e.ip, 0, 0, e.t, e.kind, 8 * len(frames))
        return head + struct.pack(f"<{len(frames)}Q", *frames)
    if e.kind == OFF_SUM:
        return _HEAD.pack(e.pid, e.tid, e.ip, e.sp, 0, e.t, e.kind, _SUMS.size) + _SUMS.pack(
            *e.sums
        )
    if e.kind == RETURNS:
        pairs = e.returns[:MAX_RETURNS]
        head = _HEAD.pack(e.pid, e.tid, e.ip, e.sp, 0, e.t, e.kind, 16 * len(pairs))
        return head + b"".join(struct.pack("<QQ", *p) for p in pairs)
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
    if kind == OFF_SUM:
        if size != _SUMS.size or len(data) < _HEAD.size + _SUMS.size:
            return None
        sums = _SUMS.unpack_from(data, _HEAD.size)
        return Event(kind, pid, tid, t, ip, sp, sums=(sums[0], sums[1], sums[2]))
    if kind == RETURNS:
        n = min(size, len(data) - _HEAD.size, 16 * MAX_RETURNS) // 16
        words = struct.unpack_from(f"<{2 * n}Q", data, _HEAD.size)
        pairs = tuple(zip(words[::2], words[1::2], strict=True))
        return Event(kind, pid, tid, t, ip, sp, returns=pairs)  # ip, sp: a stepped probe's
    stack = data[_HEAD.size : _HEAD.size + min(size, STACK_BYTES)]
    return Event(kind, pid, tid, t, ip, sp, bp, bytes(stack))


def _fsbase() -> int:
    """Where this kernel keeps a thread's fs base in its task_struct (its BTF), or -1."""
    from adaptyst_top.collectors.probes.bpf.kernel_btf import BTFError, member_offset

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
    ) -> None:
        self.hz = hz
        self._on_event = on_event
        self._lock = threading.Lock()
        self.bpf = load_program(confine, _fsbase())
        # process -> (when to look again, the wait after that, whether it was found)
        self._pythons: dict[int, tuple[float, float, bool]] = {}
        try:
            fill_offsets(self.bpf["pyoffs"])
            scope = self.bpf["scope"]
            for pid in pids:
                scope[ctypes.c_uint(pid)] = ctypes.c_ubyte(1)
            self._ring = self.bpf.ring_buffer("events", self._take)
            for name in _PROGRAMS[1:]:  # the tracepoints; the clock is opened by _attach
                self.bpf.attach_program(name)
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
            except Exception:  # a full map
                return False
            return True

    def _attach(self, hz: int) -> None:
        # Every CPU, filtered by process in the program: a thread that moves or is
        # started later is sampled with no new event to open.
        self.bpf["gap"][ctypes.c_uint32(0)] = ctypes.c_uint64(1_000_000_000 // hz)
        self.bpf.attach_cpu_clock("on_cpu", hz)
        self.hz = hz

    def set_hz(self, hz: int) -> None:
        """Sample at HZ from now on (the budget lowers the rate): the clock's events are
        opened again at that frequency."""
        with self._lock:
            if not self.closed and hz != self.hz:
                self.bpf.detach_cpu_clock()
                self._attach(hz)

    def drop(self, pid: int) -> None:
        """PID is sampled no more (its threads' entries go as they exit)."""
        with self._lock:
            if not self.closed:
                with contextlib.suppress(KeyError):
                    del self.bpf["scope"][ctypes.c_uint(pid)]

    def _take(self, data: bytes) -> None:
        event = decode(data)
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
        execs = self._execs(pid)
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
            if self._execs(pid) != execs:  # it exec'd meanwhile: what was found is gone
                self.forget_python(pid)
                self._pythons[pid] = (now, PY_RECHECK_S, False)

    def _execs(self, pid: int) -> int:
        """PID's execs seen by the kernel while in scope (-1: closed)."""
        with self._lock:
            if self.closed:
                return -1
            try:
                return int(self.bpf["pyexecs"][ctypes.c_uint32(pid)].value)
            except KeyError:
                return 0

    def forget_python(self, pid: int) -> None:
        with self._lock, contextlib.suppress(KeyError):
            if not self.closed:
                del self.bpf["pyproc"][ctypes.c_uint32(pid)]

    def poll(self, timeout_ms: int = 0) -> None:
        self._ring.poll(timeout_ms)

    @property
    def lost(self) -> int:
        """Events dropped for a full ring buffer (the count as it was at close, after)."""
        with self._lock:
            if not self.closed:
                self._lost = int(self.bpf["lost"][ctypes.c_uint32(0)].value)
            return self._lost

    def run_ns(self) -> tuple[float | None, float | None]:
        """Mean kernel time of one run of the sampling program and of the switch program
        (which runs at every context switch on the node), from their run-time statistics
        (None until they were sampled: overhead.BpfStats)."""
        out: list[float | None] = []
        with self._lock:
            for name in ("on_cpu", "on_switch"):
                f = self.bpf.funcs.get(name) if not self.closed else None
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
        with contextlib.suppress(Exception):
            self.bpf.cleanup()
