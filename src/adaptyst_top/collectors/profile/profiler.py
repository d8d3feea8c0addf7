"""A profile of the session's processes: the sampler's events read on one thread and
unwound and counted (tally.py) on another, handed over as the snapshot's part."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

from adaptyst_top.collectors.probes.cost.overhead import DEFAULT_BUDGET, BpfStats
from adaptyst_top.collectors.probes.safety.confinement import Confinement
from adaptyst_top.collectors.profile import DEFAULT_HZ
from adaptyst_top.collectors.profile.budget import ProfileBudget, Reading
from adaptyst_top.collectors.profile.sampler import (
    OFF_START,
    OFF_SUM,
    ON_CPU,
    READ_EVERY_MS,
    Event,
    Sampler,
)
from adaptyst_top.collectors.profile.tally import Tally
from adaptyst_top.snapshot.profile import ProfilePart

CLOSE_WAIT_S = 5.0
MAX_QUEUED = 20000  # events read, not yet unwound
MAX_QUEUED_BYTES = 16 << 20  # their stacks' bytes (a stalled unwinder: the rest is lost)
_END = Event(-1, 0, 0, 0)


class Counts(Protocol):
    """Where events are unwound and counted: a Tally here (root's own session), or the
    agent's hand-over to a process of the profiled user's (agent/core/unwinder.py)."""

    def take(self, e: Event) -> None: ...
    def seen(self, pid: int, ip: int) -> None: ...  # each stack's, on the reader's thread
    def flush(self) -> None: ...  # the queue ran dry: what is held goes now
    def part(self, hz: int) -> ProfilePart: ...
    def close(self) -> None: ...


class LocalCounts(Tally):
    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


SamplerFactory = Callable[
    [Iterable[int], int, Callable[[Event], None], Confinement | None], Sampler
]


class Profiler:
    """The sampler's events read off the kernel's buffer on one thread and handed to
    COUNTS on another; CONFINE: only that user's own processes are sampled (the agent's);
    OWNER: whose account the sampler counts in; BUDGET: the share of the
    target's CPU the profile may cost before its rate is lowered (budget.py)."""

    def __init__(
        self,
        pids: Iterable[int],
        hz: int = DEFAULT_HZ,
        sampler: SamplerFactory = Sampler,
        counts: Callable[[], Counts] = LocalCounts,
        confine: Confinement | None = None,
        budget: float = DEFAULT_BUDGET,
    ) -> None:
        self.hz = self.asked_hz = hz
        self.budget = ProfileBudget(budget)
        self.dropped = 0
        self.samples = self.switches = 0  # as the kernel handed them over
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
        self._held = 0  # bytes of the stacks queued
        self._busy = False  # the unwinder holds an event
        self.counts = counts()
        try:
            self.sampler = sampler(pids, hz, self._take, confine)
        except BaseException:
            self.counts.close()
            raise
        self._threads = [
            threading.Thread(target=self._read, name="profile-reader", daemon=True),
            threading.Thread(target=self._unwind, name="profile-unwinder", daemon=True),
        ]
        try:
            for t in self._threads:
                t.start()
        except RuntimeError:  # no thread to be had: nothing is left attached
            self._stop.set()
            if self._threads[0].is_alive():  # the reader: out of its poll before the close
                self._threads[0].join()
            self.sampler.close()
            self.counts.close()
            raise

    def add(self, pid: int) -> bool:
        """Sample PID too (a job's new process); False when that cannot be done."""
        return not self._stop.is_set() and self.sampler.add(pid)

    def drop(self, pid: int) -> None:
        """PID is sampled no more (it stopped being the user's to profile)."""
        if not self._stop.is_set():
            self.sampler.drop(pid)

    def _read(self) -> None:
        while not self._stop.is_set():
            self.sampler.poll(READ_EVERY_MS)
            with self._queued:
                self._polls += 1
                self._queued.notify_all()
        self.sampler.poll(0)  # what the kernel still holds
        with self._queued:
            self._queue.append(_END)
            self._queued.notify()

    def _take(self, e: Event) -> None:
        if e.kind in (ON_CPU, OFF_START):
            self.counts.seen(e.pid, e.ip)
        if e.kind == ON_CPU:
            self.samples += 1
        elif e.kind == OFF_START:
            self.switches += 1
        elif e.kind == OFF_SUM:
            self.switches += e.sp  # the switch-outs summed
        with self._queued:
            if len(self._queue) == MAX_QUEUED or self._held + len(e.stack) > MAX_QUEUED_BYTES:
                self.dropped += 1
                return
            self._held += len(e.stack)
            self._queue.append(e)
            self._queued.notify_all()

    def _unwind(self) -> None:
        while True:
            with self._queued:
                dry = not self._queue
            if dry:
                self.counts.flush()  # before `_busy` says all is counted
                with self._queued:
                    self._busy = False
                    self._queued.notify_all()
                    while not self._queue:
                        self._queued.wait()
            with self._queued:
                e = self._queue.popleft()
                self._held -= len(e.stack)
                self._busy = True
            if e is _END:
                return
            if not self._stop.is_set():  # closing: what is queued goes unread
                self.counts.take(e)

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

    def part(self) -> ProfilePart:
        """The profile so far, with the stacks the interval since the last call added."""
        if not self.closed:
            if self.stats.window_closed():
                sample, switch = self.sampler.run_ns()
                self.sample_ns = sample if sample is not None else self.sample_ns
                self.switch_ns = switch if switch is not None else self.switch_ns
            self.stats.tick()
        part = self.counts.part(self.hz)
        if not self.closed:
            now = Reading(time.monotonic(), self.samples, self.switches, part.cpu_s)
            lower = self.budget.update(now, self.hz, self.sample_ns, self.switch_ns)
            if lower is not None:
                self.sampler.set_hz(lower)
                self.hz = lower
        share = self.budget.share
        return dataclasses.replace(
            part,
            hz=self.hz,
            asked_hz=self.asked_hz if self.asked_hz != self.hz else 0,
            share=None if share is None else round(share, 6),
            lost=part.lost + self.sampler.lost + self.dropped,
            sample_ns=None if self.sample_ns is None else round(self.sample_ns, 1),
            switch_ns=None if self.switch_ns is None else round(self.switch_ns, 1),
            note="; ".join(n for n in (part.note, self.budget.said) if n),
        )

    def close(self) -> None:
        """Detach; the events still in the buffer are read first."""
        if self._stop.is_set():
            return
        self._stop.set()
        # The reader leaves within its poll's 100 ms, the unwinder after the event it is
        # on (a table bounded by cfi.py's limits); then the kernel's side is detached.
        # The reader is waited for whole: the module must not go while it polls (its
        # poll returns within 100 ms; its callback only queues).
        reader, unwinder = self._threads
        reader.join()
        unwinder.join(CLOSE_WAIT_S)
        self.stats.restore()
        self.sampler.close()
        self.counts.close()

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    # What an owner's account counts (attach_account.Holder): a sampler is one module.

    def points_held(self) -> int:
        return 0

    def groups_held(self) -> tuple[int, int]:
        return (1, 0)
