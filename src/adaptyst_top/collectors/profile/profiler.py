"""A profile of the session's processes: the sampler's events unwound on a thread of
their own and counted by function and by stack, handed over as the snapshot's part."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

from adaptyst_top.collectors.probes.overhead import BpfStats
from adaptyst_top.collectors.profile import DEFAULT_HZ
from adaptyst_top.collectors.profile.maps import ProcessMaps
from adaptyst_top.collectors.profile.sampler import (
    HEADER_BYTES,
    OFF_END,
    OFF_SAME,
    OFF_START,
    ON_CPU,
    Event,
    Sampler,
)
from adaptyst_top.collectors.profile.unwind import Stack, unwind
from adaptyst_top.snapshot.profile import ProfileFunction, ProfilePart, ProfileStack

TOP_FUNCTIONS = 50  # functions in each snapshot (the hottest by total, then off-CPU)
MAX_STACKS = 5000  # distinct stacks one interval keeps; the rest are counted in `lost`
MAX_PENDING = 65536  # threads off the CPU whose return is awaited
MAX_PROCESSES = 4096  # processes whose maps are kept
CLOSE_WAIT_S = 5.0
MAX_QUEUED = 20000  # events read, not yet unwound (~160 MiB at most, full stacks)
_END = Event(-1, 0, 0, 0)


def _bounded_put(d: dict[int, Any], key: int, value: Any) -> None:
    """D[KEY] = VALUE, the oldest entry dropped first where D holds MAX_PENDING."""
    if key not in d and len(d) >= MAX_PENDING:
        d.pop(next(iter(d)))
    d[key] = value


Key = tuple[str, str]  # (module, function)


class Profiler:
    def __init__(
        self,
        pids: Iterable[int],
        hz: int = DEFAULT_HZ,
        sampler: Callable[[Iterable[int], int, Callable[[Event], None]], Sampler] = Sampler,
    ) -> None:
        self.hz = hz
        self._lock = threading.Lock()
        self._maps: dict[int, ProcessMaps] = {}
        # Each thread off the CPU now: when it left, its process, its stack (one at a time
        # per thread: a later switch-out replaces an end that never came).
        self._pending: dict[int, tuple[int, int, Stack]] = {}
        self._last_off: dict[int, tuple[int, Stack]] = {}  # each thread's last off-CPU stack
        self.samples = self.complete = self.dropped = 0
        self.off_ns = self.runnable_ns = 0.0
        self.cpu_s = 0.0
        self.events = self.copied_bytes = 0
        self._self: Counter[Key] = Counter()
        self._total: Counter[Key] = Counter()
        self._off: Counter[Key] = Counter()
        self._symbols: dict[Key, str] = {}
        self._stacks: dict[tuple[int, int, tuple[str, ...]], list[float]] = {}
        self._stop = threading.Event()
        # Run-time statistics held on one part in ten, as the probe engine holds them.
        self.stats = BpfStats()
        self.sample_ns: float | None = None
        self.switch_ns: float | None = None
        # The reader only moves events out of the kernel's buffer, so that a stall here
        # (a library's tables read the first time: libc's take ~0.9 s) fills this queue,
        # not the kernel's, which would drop them.
        self._queue: deque[Event] = deque(maxlen=MAX_QUEUED)
        self._queued = threading.Condition()
        self._polls = 0  # the reader's polls so far
        self._busy = False  # the unwinder holds an event
        self.sampler = sampler(pids, hz, self._take)
        self._threads = [
            threading.Thread(target=self._read, name="profile-reader", daemon=True),
            threading.Thread(target=self._unwind, name="profile-unwinder", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def add(self, pid: int) -> bool:
        """Sample PID too (a job's new process); False when that cannot be done."""
        return not self._stop.is_set() and self.sampler.add(pid)

    def _read(self) -> None:
        while not self._stop.is_set():
            self.sampler.poll(100)
            with self._queued:
                self._polls += 1
                self._queued.notify_all()
        self.sampler.poll(0)  # what the kernel still holds
        with self._queued:
            self._queue.append(_END)
            self._queued.notify()

    def _take(self, e: Event) -> None:
        with self._queued:
            if len(self._queue) == MAX_QUEUED:
                self.dropped += 1
            self._queue.append(e)
            self._queued.notify_all()

    def _unwind(self) -> None:
        while True:
            with self._queued:
                self._busy = False
                self._queued.notify_all()
                while not self._queue:
                    self._queued.wait()
                e = self._queue.popleft()
                self._busy = True
            if e is _END:
                return
            if not self._stop.is_set():  # closing: what is queued goes unread
                self._event(e)

    def drain(self, timeout: float = 1.0) -> None:
        """Wait until what the kernel held at the call is counted (for a last snapshot)."""
        deadline = time.monotonic() + timeout
        with self._queued:
            polled = self._polls + 2  # a poll that had begun may have missed the latest
            while self._polls < polled or self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return
                self._queued.wait(left)

    def _stack_of(self, e: Event) -> Stack:
        maps = self._maps.get(e.pid)
        if maps is None:
            if len(self._maps) >= MAX_PROCESSES:
                self._maps.pop(next(iter(self._maps)))
            maps = self._maps[e.pid] = ProcessMaps(e.pid)
        return unwind(maps, e.ip, e.sp, e.bp, e.stack)

    def _event(self, e: Event) -> None:
        started = time.thread_time()
        self.events += 1
        self.copied_bytes += HEADER_BYTES + len(e.stack)
        if e.kind == OFF_END:
            pending = self._pending.pop(e.tid, None)
            if pending is not None and pending[0] == e.t:  # its own switch-out, not a stale one
                self._charge_off(pending[1], e.tid, pending[2], e.off_ns, e.runnable)
        elif e.kind == OFF_SAME:
            last = self._last_off.get(e.tid)
            if last is not None:
                self._off_start(e.tid, e.t, *last)
        elif e.kind in (ON_CPU, OFF_START):
            stack = self._stack_of(e)
            if e.kind == ON_CPU:
                self._charge_on(e.pid, e.tid, stack)
            else:
                self._off_start(e.tid, e.t, e.pid, stack)
                _bounded_put(self._last_off, e.tid, (e.pid, stack))
        self.cpu_s += time.thread_time() - started

    def _off_start(self, tid: int, t: int, pid: int, stack: Stack) -> None:
        _bounded_put(self._pending, tid, (t, pid, stack))

    def _entry(self, pid: int, tid: int, stack: Stack) -> list[float] | None:
        key = (pid, tid, tuple(f.name for f in reversed(stack.frames)))
        entry = self._stacks.get(key)
        if entry is None:
            if len(self._stacks) >= MAX_STACKS:
                self.dropped += 1
                return None
            entry = self._stacks[key] = [0, 0.0, 0.0]
        return entry

    def _charge_on(self, pid: int, tid: int, stack: Stack) -> None:
        with self._lock:
            self.samples += 1
            self.complete += stack.complete
            if stack.frames:
                leaf = stack.frames[0]
                self._self[(leaf.module, leaf.name)] += 1
            for f in stack.frames:
                self._symbols.setdefault((f.module, f.name), f.symbol)
            for key in {(f.module, f.name) for f in stack.frames}:
                self._total[key] += 1
            if (entry := self._entry(pid, tid, stack)) is not None:
                entry[0] += 1

    def _charge_off(self, pid: int, tid: int, stack: Stack, ns: int, runnable: bool) -> None:
        with self._lock:
            if runnable:
                self.runnable_ns += ns
            else:
                self.off_ns += ns
            for f in stack.frames:
                self._symbols.setdefault((f.module, f.name), f.symbol)
            for key in {(f.module, f.name) for f in stack.frames}:
                self._off[key] += ns
            if (entry := self._entry(pid, tid, stack)) is not None:
                entry[2 if runnable else 1] += ns

    def part(self) -> ProfilePart:
        """The profile so far, with the stacks the interval since the last call added."""
        if not self.sampler_closed:
            if self.stats.window_closed():
                sample, switch = self.sampler.run_ns()
                self.sample_ns = sample if sample is not None else self.sample_ns
                self.switch_ns = switch if switch is not None else self.switch_ns
            self.stats.tick()
        with self._lock:
            stacks = tuple(
                ProfileStack(pid, tid, frames, int(v[0]), v[1], v[2])
                for (pid, tid, frames), v in self._stacks.items()
            )
            self._stacks = {}
            hot = sorted(
                set(self._total) | set(self._off),
                key=lambda k: (-self._total[k], -self._off[k], k),
            )[:TOP_FUNCTIONS]
            functions = tuple(
                ProfileFunction(
                    name,
                    module,
                    self._symbols.get((module, name), ""),
                    self._self[(module, name)],
                    self._total[(module, name)],
                    float(self._off[(module, name)]),
                )
                for module, name in hot
            )
            return ProfilePart(
                hz=self.hz,
                samples=self.samples,
                complete=self.complete,
                off_ns=self.off_ns,
                runnable_ns=self.runnable_ns,
                lost=self.sampler.lost + self.dropped,
                functions=functions,
                stacks=stacks,
                sample_ns=None if self.sample_ns is None else round(self.sample_ns, 1),
                switch_ns=None if self.switch_ns is None else round(self.switch_ns, 1),
                events=self.events,
                copied_bytes=self.copied_bytes,
                cpu_s=round(self.cpu_s, 3),
            )

    def close(self) -> None:
        """Detach; the events still in the buffer are read first."""
        if self._stop.is_set():
            return
        self._stop.set()
        # The reader leaves within its poll's 100 ms, the unwinder after the event it is
        # on (a table bounded by cfi.py's limits); then the kernel's side is detached.
        for t in self._threads:
            t.join(CLOSE_WAIT_S)
        self.stats.restore()
        self.sampler.close()

    @property
    def sampler_closed(self) -> bool:
        return self._stop.is_set()
