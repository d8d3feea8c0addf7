"""The counting half of a profile: the sampler's events unwound and counted by function
and by stack. No threads and no BPF: root's own session runs it beside the sampler, the
agent runs it in a process of the profiled user's (agent/worker/unwind_stacks.py), where
the user's binaries are read with the user's rights only."""

from __future__ import annotations

import bisect
import functools
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from adaptyst_top.collectors.profile.maps import REREAD_S, Mapping, ProcessMaps, read_maps
from adaptyst_top.collectors.profile.python.stacks import PythonStacks
from adaptyst_top.collectors.profile.sampler import (
    HEADER_BYTES,
    OFF_END,
    OFF_START,
    OFF_SUM,
    ON_CPU,
    PY_FRAMES,
    RETURNS,
    Event,
)
from adaptyst_top.collectors.profile.unwind import Pending, Stack, unwind
from adaptyst_top.snapshot.profile import ProfileFunction, ProfilePart, ProfileStack

TOP_FUNCTIONS = 50  # functions in each snapshot (the hottest by total, then off-CPU)
MAX_STACKS = 5000  # distinct stacks one interval keeps; the rest are counted in `lost`
MAX_PENDING = 65536  # threads off the CPU whose return is awaited
MAX_PROCESSES = 4096  # processes whose maps are kept

Key = tuple[str, str]  # (module, function)
_NONE = ("", "", 0)


def _covers(maps: list[Mapping], ip: int) -> bool:
    i = bisect.bisect_right(maps, ip, key=lambda m: m.start) - 1
    return i >= 0 and ip < maps[i].end


def _bounded_put(d: dict[int, Any], key: int, value: Any) -> None:
    """D[KEY] = VALUE, the oldest entry dropped first where D holds MAX_PENDING."""
    if key not in d and len(d) >= MAX_PENDING:
        d.pop(next(iter(d)))
    d[key] = value


class Tally:
    """`take()` from one thread; `part()` from any."""

    def __init__(self, open_file: Callable[[str], int | None] | None = None) -> None:
        """OPEN_FILE: how mapped files are opened (maps.ProcessMaps)."""
        self._open_file = open_file
        self._lock = threading.Lock()
        self._maps: dict[int, ProcessMaps] = {}
        # Each process's maps as the reader's thread last read them (seen()), and when a
        # read last left an ip uncovered.
        self._early: dict[int, list[Mapping]] = {}
        self._early_at: dict[int, float] = {}
        # Each thread off the CPU now: when it left, its process, its stack (one at a time
        # per thread: a later switch-out replaces an end that never came).
        self._pending: dict[int, tuple[int, int, Stack]] = {}
        # Each thread's last off-CPU stack copied: when, its process, the stack.
        self._last_off: dict[int, tuple[int, int, Stack]] = {}
        self.samples = self.complete = self.dropped = 0
        self.off_ns = self.runnable_ns = 0.0
        self.cpu_s = 0.0
        self.events = self.copied_bytes = 0
        self._self: Counter[Key] = Counter()
        self._total: Counter[Key] = Counter()
        self._off: Counter[Key] = Counter()
        # A function's symbol, where its name came from, its line (Python's)
        self._symbols: dict[Key, tuple[str, str, int]] = {}
        self._python = PythonStacks()
        # Each thread's uprobes' state, sent just before its next stack: (when, the state)
        self._uprobes: dict[int, tuple[int, Pending]] = {}
        self._stacks: dict[tuple[int, int, tuple[str, ...]], list[float]] = {}

    def _stack_of(self, e: Event) -> Stack:
        maps = self._maps.get(e.pid)
        if maps is None:
            if len(self._maps) >= MAX_PROCESSES:
                self._maps.pop(next(iter(self._maps)))
            maps = self._maps[e.pid] = ProcessMaps(
                e.pid, self._open_file, functools.partial(self._early.get, e.pid)
            )
        held = self._uprobes.pop(e.tid, None)
        pending = held[1] if held is not None and held[0] == e.t else None
        stack = unwind(maps, e.ip, e.sp, e.bp, e.stack, pending)
        return self._python.merged(e, stack)

    def seen(self, pid: int, ip: int) -> None:
        """A stack of PID's at IP, as the kernel's events are read (on that thread only):
        its maps read now if they do not cover IP (a new process, or one that exec'd
        since: a forked shell's first events are the shell's), for when it is gone before
        its stacks are unwound (gzip's 0.1 s runs: 7.5% of a profile was `[unknown]`,
        where perf, which keeps the kernel's mmap events, names the file)."""
        early = self._early.get(pid)
        if early is not None:
            if _covers(early, ip):
                return
            # An ip that a read just now left uncovered too (a JIT's code, a process
            # gone): read again at most every REREAD_S, as ProcessMaps does.
            if time.monotonic() - self._early_at.get(pid, -REREAD_S) < REREAD_S:
                return
        elif len(self._early) >= MAX_PROCESSES:
            gone = next(iter(self._early))
            self._early.pop(gone, None)
            self._early_at.pop(gone, None)
        maps = self._early[pid] = read_maps(pid) or early or []
        if _covers(maps, ip):
            self._early_at.pop(pid, None)
        else:
            self._early_at[pid] = time.monotonic()

    def take(self, e: Event) -> None:
        started = time.thread_time()
        self.events += 1
        self.copied_bytes += HEADER_BYTES + len(e.stack)
        if e.kind == PY_FRAMES:
            self._python.hold(e)
        elif e.kind == RETURNS:
            _bounded_put(self._uprobes, e.tid, (e.t, Pending(dict(e.returns), e.ip, e.sp)))
        elif e.kind == OFF_END:
            pending = self._pending.pop(e.tid, None)
            if pending is not None and pending[0] == e.t:  # its own switch-out, not a stale one
                self._charge_off(pending[1], e.tid, pending[2], e.off_ns, e.runnable)
            else:  # its stack unknown (not copied, lost, dropped): counted, on no stack
                with self._lock:
                    self._add_off(e.off_ns, e.runnable)
        elif e.kind == OFF_SUM:
            # Only the copy it names (ip: that copy's time): with the copy lost or dropped
            # the time is charged to no stack, never to an older one.
            blocked, runnable, elsewhere = e.sums
            last = self._last_off.get(e.tid)
            for ns, is_runnable in ((blocked, False), (runnable, True)):
                if not ns:
                    continue
                if last is not None and last[0] == e.ip:
                    self._charge_off(last[1], e.tid, last[2], ns, is_runnable)
                else:
                    with self._lock:
                        self._add_off(ns, is_runnable)
            with self._lock:
                self._add_off(elsewhere, True)
        elif e.kind in (ON_CPU, OFF_START):
            stack = self._stack_of(e)
            if e.kind == ON_CPU:
                self._charge_on(e.pid, e.tid, stack)
            else:
                self._off_start(e.tid, e.t, e.pid, stack)
                _bounded_put(self._last_off, e.tid, (e.t, e.pid, stack))
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
                self._symbols.setdefault((f.module, f.name), (f.symbol, f.named_by, f.line))
            for key in {(f.module, f.name) for f in stack.frames}:
                self._total[key] += 1
            if (entry := self._entry(pid, tid, stack)) is not None:
                entry[0] += 1

    def _add_off(self, ns: int, runnable: bool) -> None:
        if runnable:
            self.runnable_ns += ns
        else:
            self.off_ns += ns

    def _charge_off(self, pid: int, tid: int, stack: Stack, ns: int, runnable: bool) -> None:
        with self._lock:
            self._add_off(ns, runnable)
            for f in stack.frames:
                self._symbols.setdefault((f.module, f.name), (f.symbol, f.named_by, f.line))
            for key in {(f.module, f.name) for f in stack.frames}:
                self._off[key] += ns
            if (entry := self._entry(pid, tid, stack)) is not None:
                entry[2 if runnable else 1] += ns

    def part(self, hz: int) -> ProfilePart:
        """The counts so far, with the stacks the interval since the last call added;
        `lost` counts the stacks past MAX_STACKS only (the kernel's side adds its own)."""
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
                    self._symbols.get((module, name), _NONE)[0],
                    self._self[(module, name)],
                    self._total[(module, name)],
                    float(self._off[(module, name)]),
                    self._symbols.get((module, name), _NONE)[1],
                    self._symbols.get((module, name), _NONE)[2],
                )
                for module, name in hot
            )
            return ProfilePart(
                hz=hz,
                samples=self.samples,
                complete=self.complete,
                off_ns=self.off_ns,
                runnable_ns=self.runnable_ns,
                lost=self.dropped,
                functions=functions,
                stacks=stacks,
                events=self.events,
                copied_bytes=self.copied_bytes,
                cpu_s=round(self.cpu_s, 3),
            )
