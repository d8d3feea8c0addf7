"""The agent's processes of a user's: each exec'd fresh (never a fork of the threaded
agent, nor of any one process: each has its own address-space layout, stack canary and
hash seed), told first, while it is still root and no user can reach it, whose it is;
it then takes that user's ids for good (agent/worker/). A kind may keep one spare,
exec'd ahead with its imports done and waiting to be told, so a fresh user's first
request does not wait for an interpreter to start (bench/bench_agent_first_probe.py);
the next spare is started as one is taken. One worker is kept per user while used (it
exits by itself when idle); one that fails, lies or is late is killed and costs only its
own user one line. A user's requests queue behind each other; other users' never wait.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from adaptyst_top.runtime.remote.settings import AgentSettings

Key = tuple[int, int, tuple[int, ...]]  # uid, gid, groups
FRAME = struct.Struct(">I")  # a stream worker's message: its length, then its bytes
# A spare's start (its interpreter and imports, ~100 ms of CPU) waits this long after one
# is taken: it no longer competes with the first requests of the user who took it.
REFILL_DELAY_S = 1.0
WARM_EVERY_S = 5.0  # a user's hellos take a spare at most this often (her workers' idle time)


class WorkerFailed(Exception):
    """Why a user's worker could not be started, in one line."""


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    link: socket.socket


@dataclass
class KeptWorkers:
    """One kind of worker (WHAT names it in errors), started as ARGV plus its end of a
    socket of KIND (SOCK_SEQPACKET: a message a request; SOCK_STREAM: FRAMEd); SPARE:
    one is kept started ahead once keep_spares() says so."""

    what: str
    argv: list[str]
    kind: int = socket.SOCK_SEQPACKET
    spare: bool = False
    kept: dict[Key, Worker] = field(default_factory=dict)
    _locks: dict[int, threading.Lock] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _spare: Worker | None = None
    _refilling: bool = False
    _warmed: dict[int, float] = field(default_factory=dict)  # uid -> her last spare's time

    def __post_init__(self) -> None:
        _ALL.append(self)

    def user_lock(self, uid: int) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(uid, threading.Lock())

    def take(self, key: Key) -> Worker | None:
        """The worker kept for KEY, now the caller's (None: start one)."""
        with self._lock:
            return self.kept.pop(key, None)

    def keep(self, key: Key, worker: Worker) -> None:
        """Keep WORKER for KEY, and only it of its user's: one who asks under many group
        sets (newgrp) keeps one process, not one a set."""
        with self._lock:
            others = [k for k in self.kept if k[0] == key[0] and k != key]
            ended = [self.kept.pop(k) for k in others]
            self.kept[key] = worker
        for w in ended:
            end(w)

    def start(self, uid: int, gid: int, groups: Sequence[int]) -> Worker:
        """A worker of UID's, told whose it is: the spare if one runs, else exec'd now."""
        _reserve()
        proc = None
        try:
            worker = self._take_spare() or self._exec(uid)
            proc = worker.proc
            self._tell(worker, uid, gid, groups)
            return worker
        finally:
            _settle(proc)
            self.refill_later()

    def _tell(self, worker: Worker, uid: int, gid: int, groups: Sequence[int]) -> None:
        """WORKER told whose it is (it takes those ids before it reads a request)."""
        try:
            send(worker.link, json.dumps({"uid": uid, "gid": gid, "groups": list(groups)}).encode())
        except OSError:
            end(worker)
            raise WorkerFailed(f"{self.what} for uid {uid} did not start") from None

    def _exec(self, uid: int | None) -> Worker:
        who = "a spare" if uid is None else f"uid {uid}"
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, self.kind)
        except OSError as exc:  # out of descriptors: this one fails, the agent goes on
            raise WorkerFailed(f"could not start {self.what} for {who}: {exc.strerror}") from None
        try:
            proc = subprocess.Popen(
                [*self.argv, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={},  # the agent's environment is not the user's to read
                cwd="/",
            )
        except OSError as exc:
            ours.close()
            raise WorkerFailed(f"could not start {self.what} for {who}: {exc.strerror}") from None
        finally:
            theirs.close()
        return Worker(proc, ours)

    def _take_spare(self) -> Worker | None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.proc.poll() is not None:
            spare.link.close()  # it ended (killed, out of memory): one exec'd now
            return None
        return spare

    def refill_later(self, delay_s: float = REFILL_DELAY_S) -> None:
        """A spare started on a thread of its own after DELAY_S, unless one runs or is
        starting. Never raises: the guard calls it (a thread the node cannot start is a
        spare not kept)."""
        with self._lock:
            if not (self.spare and _SPARES[0]) or self._spare is not None or self._refilling:
                return
            self._refilling = True
        try:
            threading.Thread(
                target=self._refill, args=(delay_s,), name="agent-spare", daemon=True
            ).start()
        except RuntimeError:
            with self._lock:
                self._refilling = False

    def _refill(self, delay_s: float) -> None:
        spare = None
        try:
            time.sleep(delay_s)
            spare = self._exec(None)
        except WorkerFailed as exc:
            print(f"adaptyst-top agent: {exc}", file=sys.stderr)
        finally:
            with self._lock:
                self._refilling = False
                if spare is not None and _SPARES[0] and self._spare is None:
                    self._spare, spare = spare, None
        if spare is not None:
            end(spare)

    def end_spare(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            end(spare)

    def warm(self, uid: int, gid: int, groups: Sequence[int]) -> None:
        """UID's worker ready for her first request: the spare, if one waits, she has
        none kept and no request of hers holds her lock. Never an exec at a hello: a
        user who kills her workers and says hello again, in a loop, costs root one spare
        a WARM_EVERY_S at most (an exec at each hello cost ~120 ms of root's CPU)."""
        if not self.spare or _running() * 2 >= _CAP[0]:
            return  # the rest of the room is for requests
        lock = self.user_lock(uid)
        if not lock.acquire(blocking=False):
            return
        try:
            now = time.monotonic()
            with self._lock:
                if (
                    any(k[0] == uid for k in self.kept)
                    or now - self._warmed.get(uid, -1e9) < WARM_EVERY_S
                ):
                    return
                if len(self._warmed) > 4096:  # users long gone
                    self._warmed = {u: t for u, t in self._warmed.items() if now - t < WARM_EVERY_S}
            _reserve()
            proc = None
            try:
                spare = self._take_spare()
                if spare is None:
                    return
                with self._lock:
                    self._warmed[uid] = now
                proc = spare.proc
                with contextlib.suppress(WorkerFailed):
                    self._tell(spare, uid, gid, groups)
                    self.keep((uid, gid, tuple(sorted(groups))), spare)
            finally:
                _settle(proc)
                self.refill_later()
        except WorkerFailed:
            return  # past max_workers: her request says so
        finally:
            lock.release()

    def end_all_of(self, uid: int) -> None:
        """End UID's kept workers of this kind."""
        with self._lock:
            keys = [k for k in self.kept if k[0] == uid]
            ended = [self.kept.pop(k) for k in keys]
        for w in ended:
            end(w)

    def end_all(self) -> None:
        with self._lock:
            ended = list(self.kept.values())
            self.kept.clear()
        for w in ended:
            end(w)

    def reap_idle(self) -> None:
        with self._lock:
            gone = [k for k, w in self.kept.items() if w.proc.poll() is not None]
            ended = [self.kept.pop(k) for k in gone]
            spare = self._spare
            if spare is not None and spare.proc.poll() is not None:
                self._spare = None  # it ended (killed, out of memory): another
                ended.append(spare)
        for w in ended:
            w.link.close()
        self.refill_later()


_ALL: list[KeptWorkers] = []
_SPARES = [False]  # keep_spares() was called: the agent runs
_CAP = [AgentSettings().max_workers]  # as the agent's settings say (limit)
_LIVE: weakref.WeakSet[subprocess.Popen[bytes]] = (
    weakref.WeakSet()
)  # told whose, not yet seen ended
_STARTING = [0]  # reserved by start(), not yet in _LIVE
_LIVE_LOCK = threading.Lock()


def limit(max_workers: int) -> None:
    """At most MAX_WORKERS users' workers at once, every kind together."""
    _CAP[0] = max_workers


def keep_spares() -> None:
    """Each kind that keeps a spare starts one (the agent starts)."""
    _SPARES[0] = True
    for kind in _ALL:
        kind.refill_later(0.0)


def end_spares() -> None:
    """No more spares; the running ones ended (the agent stops)."""
    _SPARES[0] = False
    for kind in _ALL:
        kind.end_spare()


def _counted() -> int:
    """Users' workers running or being started (_LIVE_LOCK held; ended ones forgotten)."""
    for p in [p for p in _LIVE if p.poll() is not None]:
        _LIVE.discard(p)
    return len(_LIVE) + _STARTING[0]


def _running() -> int:
    with _LIVE_LOCK:
        return _counted()


def _reserve() -> None:
    """Room for one more worker, counted at once (concurrent starts cannot overshoot)."""
    with _LIVE_LOCK:
        running = _counted()
        if running >= _CAP[0]:
            raise WorkerFailed(
                f"the agent runs {running} workers for users, the most it runs at once "
                "(max_workers): try later"
            )
        _STARTING[0] += 1


def _settle(proc: subprocess.Popen[bytes] | None) -> None:
    """A reservation ended: PROC runs (None: none started)."""
    with _LIVE_LOCK:
        _STARTING[0] -= 1
        if proc is not None and proc.poll() is None:
            _LIVE.add(proc)


def send(link: socket.socket, data: bytes) -> None:
    """DATA as one message of LINK's kind."""
    link.sendall(FRAME.pack(len(data)) + data if link.type == socket.SOCK_STREAM else data)


END_WAIT_S = 0.5
_REAPING: list[subprocess.Popen[bytes]] = []  # killed, not yet gone (reap_idle reaps them)
_REAPING_LOCK = threading.Lock()


def end(worker: Worker) -> None:
    """Kill WORKER; never waits long: one stuck in the kernel (a read of a FUSE file its
    user's daemon never answers, a hung mount) is reaped later, not waited for."""
    worker.link.close()
    with contextlib.suppress(OSError):
        worker.proc.kill()
    try:
        worker.proc.wait(END_WAIT_S)
    except subprocess.TimeoutExpired:
        with _REAPING_LOCK:
            _REAPING.append(worker.proc)


def end_all() -> None:
    """End every kept worker of every kind (the agent stops)."""
    for kind in _ALL:
        kind.end_all()


def reap_idle() -> None:
    """Forget (and reap) the kept workers that exited idle: called often (the agent's
    guard), so none is left a zombie for long."""
    for kind in _ALL:
        kind.reap_idle()
    with _REAPING_LOCK:
        _REAPING[:] = [p for p in _REAPING if p.poll() is None]


__all__ = [
    "FRAME",
    "KeptWorkers",
    "Key",
    "Worker",
    "WorkerFailed",
    "end",
    "end_all",
    "end_spares",
    "keep_spares",
    "limit",
    "reap_idle",
    "send",
]
