"""A user's profile unwound by a process of that user's (agent/worker/unwind_stacks.py),
never by the root process: the agent's sampler hands it the kernel's events and asks it
for the counts, which are believed only as far as root can check them. An unwinder that
stalls, dies or lies is killed: its user's profile stops with one line, and nothing
else waits for it (only the session's own threads ever talk to it, with deadlines)."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import sys
import threading
import time

import orjson
import psutil

from adaptyst_top.agent.core.kept_workers import FRAME, KeptWorkers, Worker, WorkerFailed, end
from adaptyst_top.collectors.profile.sampler import (
    HEADER_BYTES,
    OFF_END,
    OFF_SUM,
    ON_CPU,
    Event,
    encode,
)
from adaptyst_top.collectors.profile.tally import MAX_STACKS, TOP_FUNCTIONS
from adaptyst_top.collectors.profile.unwind import MAX_FRAMES
from adaptyst_top.snapshot.inert import has_unsafe
from adaptyst_top.snapshot.profile import ProfilePart
from adaptyst_top.system.readable import readable

BATCH_BYTES = 256 << 10  # events handed over at once (one crossing, not one per event)
SEND_TIMEOUT_S = 2.0  # the worker reads on a thread of its own: a stall is its owner's doing
ANSWER_TIMEOUT_S = 2.0
# The worker trims its answer to this (its interval's stacks first); parsed JSON takes
# ~24 times its bytes, and answers are parsed one at a time in the agent.
MAX_ANSWER = 4 << 20
START_TIMEOUT_S = 30.0  # a fresh interpreter and its imports, from a cold NFS /opt
MAX_TEXT = 16 << 10  # a frame's, a function's or a module's name
MAX_PIDS = 65536  # processes whose events were handed over (past it: not checked)
_KIND = KeptWorkers(
    "an unwinder",
    [sys.executable, "-I", "-m", "adaptyst_top.agent.worker.unwind_stacks"],
    socket.SOCK_STREAM,
)


_PARSING = threading.Lock()  # one answer parsed at a time: its objects bounded in all


class Lied(Exception):
    """The unwinder's answer is not one it could have made."""


class UnwinderCounts:
    """profiler.Counts for UID's processes: unwound and counted in a process of UID's."""

    def __init__(self, uid: int, gid: int, groups: list[int]) -> None:
        self.uid = uid
        self._lock = threading.Lock()  # the link: one message at a time
        worker = _KIND.start(uid, gid, groups)
        try:
            self._proc = psutil.Process(worker.proc.pid)
            if _read(worker.link, FRAME.size + 1, time.monotonic() + START_TIMEOUT_S)[-1:] != b"R":
                raise WorkerFailed(f"the profile's unwinder for uid {uid} did not start")
        except BaseException as exc:  # never a worker left running, whatever stopped us
            end(worker)
            if isinstance(exc, (OSError, psutil.Error)):
                raise WorkerFailed(f"the profile's unwinder for uid {uid} did not start") from None
            raise
        self._worker: Worker | None = worker
        self._buffer = bytearray()
        self._pids: set[int] = set()
        self.events = self.copied_bytes = self.on_cpu = self.lost = 0
        self.off_total = 0.0  # ns of every off-CPU interval handed over
        self.cpu_s = 0.0
        self.note = ""
        self._last: ProfilePart | None = None

    def seen(self, pid: int, ip: int) -> None:
        """The user's worker reads the maps itself, as that user: none read here."""

    def take(self, e: Event) -> None:
        if self._worker is None:
            self.lost += 1
            return
        data = encode(e)
        self.events += 1
        self.copied_bytes += HEADER_BYTES + len(e.stack)
        if e.kind == ON_CPU:
            self.on_cpu += 1
        elif e.kind == OFF_END:
            self.off_total += e.off_ns
        elif e.kind == OFF_SUM:
            self.off_total += sum(e.sums)
        if e.kind != OFF_END and e.pid not in self._pids and len(self._pids) < MAX_PIDS:
            self._pids.add(e.pid)
        self._buffer += data
        if len(self._buffer) >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            if not self._buffer or self._worker is None:
                return
            body = b"E" + bytes(self._buffer)
            self._buffer.clear()
            try:
                self._send(self._worker, body)
            except OSError:
                self._fail("stopped taking samples")

    def part(self, hz: int) -> ProfilePart:
        with self._lock:
            got = self._last or ProfilePart(hz=hz)  # its stacks were handed on already
            worker = self._worker
            if worker is not None:
                with contextlib.suppress(psutil.Error):
                    times = self._proc.cpu_times()
                    self.cpu_s = round(times.user + times.system, 3)
                try:
                    self._send(worker, b"P" + hz.to_bytes(4, "big"))
                    got = self._checked(self._answer(worker))
                except OSError:
                    self._fail(f"did not answer in {ANSWER_TIMEOUT_S:g} s")
                except (Lied, ValueError, TypeError, KeyError, RecursionError):
                    self._fail("answered wrongly")  # SnapshotError is a ValueError
                self._last = dataclasses.replace(got, stacks=())
            # What root counted itself stands; the unwinder's word only for the rest.
            return dataclasses.replace(
                got,
                hz=hz,
                lost=got.lost + self.lost,
                events=self.events,
                copied_bytes=self.copied_bytes,
                cpu_s=self.cpu_s,
                note=self.note,
            )

    @staticmethod
    def _send(worker: Worker, body: bytes) -> None:
        worker.link.settimeout(SEND_TIMEOUT_S)
        worker.link.sendall(FRAME.pack(len(body)) + body)

    @staticmethod
    def _answer(worker: Worker) -> bytes:
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        head = _read(worker.link, FRAME.size, deadline)
        (n,) = FRAME.unpack(head)
        if n > MAX_ANSWER:
            raise Lied
        return _read(worker.link, n, deadline)

    def _checked(self, data: bytes) -> ProfilePart:
        """The answer as a ProfilePart (its declaration checks each field's type and
        range), within what the events handed over allow; Lied otherwise."""
        with _PARSING:
            raw = orjson.loads(data)
            # Sized before the declaration reads it (pure Python, on every field).
            functions, stacks = raw.get("functions", []), raw.get("stacks", [])
            if not isinstance(functions, list) or len(functions) > TOP_FUNCTIONS:
                raise Lied
            if not isinstance(stacks, list) or len(stacks) > MAX_STACKS:
                raise Lied
            part = ProfilePart.from_json(raw)
        if len(part.functions) > TOP_FUNCTIONS or len(part.stacks) > MAX_STACKS:
            raise Lied
        if part.complete > part.samples or part.samples > self.on_cpu:
            raise Lied
        if part.off_ns + part.runnable_ns > self.off_total * (1 + 1e-9) + 1:
            raise Lied
        for f in part.functions:
            if f.total > part.samples or f.self_samples > f.total:
                raise Lied
            _text(f.name, f.module, f.symbol)  # named_by: checked by its declaration
        for s in part.stacks:
            unseen = s.pid not in self._pids and len(self._pids) < MAX_PIDS
            if unseen or len(s.frames) > MAX_FRAMES + 1:
                raise Lied
            _text(*s.frames)
        return part

    def _fail(self, what: str) -> None:
        """The unwinder ends; the profile keeps what it counted, and says why."""
        if self._worker is not None:
            end(self._worker)
            self._worker = None
        self.note = f"the profile's unwinder (uid {self.uid}) {what}: counting stopped"

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                end(self._worker)
                self._worker = None


def _text(*texts: str) -> None:
    for t in texts:
        if len(t) > MAX_TEXT or has_unsafe(t):
            raise Lied


def _read(link: socket.socket, n: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        wait = deadline - time.monotonic()
        if wait <= 0 or not readable([link], wait):
            raise TimeoutError
        chunk = link.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionResetError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def counts_for(uid: int, gid: int, groups: list[int]) -> UnwinderCounts:
    """UID's profile counts, in a process of UID's; WorkerFailed in one line."""
    return UnwinderCounts(uid, gid, groups)


__all__ = ["UnwinderCounts", "counts_for"]
