"""The agent's processes of a user's: each forked by the agent's fork server
(agent/core/fork_server.py, one thread, nothing of the agent's memory) or exec'd fresh
where it cannot (never a fork of the threaded agent itself), told first, while it is still root and no user can reach it, whose it is; it
then takes that user's ids for good (agent/worker/). One is kept per user while used (it
exits by itself when idle); one that fails, lies or is late is killed and costs only its
own user one line. A user's requests queue behind each other; other users' never wait.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from adaptyst_top.agent.core import forks
from adaptyst_top.runtime.agent_settings import AgentSettings

Key = tuple[int, int, tuple[int, ...]]  # uid, gid, groups
FRAME = struct.Struct(">I")  # a stream worker's message: its length, then its bytes


class WorkerFailed(Exception):
    """Why a user's worker could not be started, in one line."""


class Proc(Protocol):
    """What is used of a worker's process: a Popen (exec'd) or a forks.Forked."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


@dataclass
class Worker:
    proc: Proc
    link: socket.socket


@dataclass
class KeptWorkers:
    """One kind of worker (WHAT names it in errors): MODULE's main() given its end of a
    socket of KIND (SOCK_SEQPACKET: a message a request; SOCK_STREAM: FRAMEd), forked
    by the fork server, else exec'd as ARGV plus that descriptor."""

    what: str
    module: str
    argv: list[str]
    kind: int = socket.SOCK_SEQPACKET
    kept: dict[Key, Worker] = field(default_factory=dict)
    _locks: dict[int, threading.Lock] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

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
        running = _running()
        if running >= _CAP[0]:
            raise WorkerFailed(
                f"the agent runs {running} workers for users, the most it runs at once "
                f"(max_workers): try later"
            )
        ours, theirs = socket.socketpair(socket.AF_UNIX, self.kind)
        try:
            proc: Proc | None = forks.SERVER.fork(self.module, theirs.fileno())
            if proc is None:
                # A fork answered too late may yet run on THEIRS: this one gets its own
                # pair (that one reads its peer's end and exits).
                ours.close()
                theirs.close()
                ours, theirs = socket.socketpair(socket.AF_UNIX, self.kind)
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
            raise WorkerFailed(
                f"could not start {self.what} for uid {uid}: {exc.strerror}"
            ) from None
        finally:
            theirs.close()
        worker = Worker(proc, ours)
        with _LIVE_LOCK:
            _LIVE.add(proc)
        try:
            send(ours, json.dumps({"uid": uid, "gid": gid, "groups": list(groups)}).encode())
        except OSError:
            end(worker)
            raise WorkerFailed(f"{self.what} for uid {uid} did not start") from None
        return worker

    def warm(self, uid: int, gid: int, groups: Sequence[int]) -> None:
        """A worker for UID started now, unless one is kept or a request of hers holds
        her lock: her first request then finds it up (forked: ms; exec'd: 40-60 ms of
        imports), overlapped with the other kinds' and with the client's own work."""
        if _running() * 2 >= _CAP[0]:
            return  # the rest of the room is for requests
        lock = self.user_lock(uid)
        if not lock.acquire(blocking=False):
            return
        try:
            with self._lock:
                if any(k[0] == uid for k in self.kept):
                    return
            with contextlib.suppress(WorkerFailed):
                self.keep((uid, gid, tuple(sorted(groups))), self.start(uid, gid, groups))
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
        for w in ended:
            w.link.close()


_ALL: list[KeptWorkers] = []
_CAP = [AgentSettings().max_workers]  # as the agent's settings say (limit)
_LIVE: weakref.WeakSet[Proc] = weakref.WeakSet()  # started, not yet seen ended
_LIVE_LOCK = threading.Lock()


def limit(max_workers: int) -> None:
    """At most MAX_WORKERS users' workers at once, every kind together."""
    _CAP[0] = max_workers


def _running() -> int:
    """Users' workers running now (those seen ended are forgotten)."""
    with _LIVE_LOCK:
        ended = [p for p in _LIVE if p.poll() is not None]
        for p in ended:
            _LIVE.discard(p)
        return len(_LIVE)


def send(link: socket.socket, data: bytes) -> None:
    """DATA as one message of LINK's kind."""
    link.sendall(FRAME.pack(len(data)) + data if link.type == socket.SOCK_STREAM else data)


END_WAIT_S = 0.5
_REAPING: list[Proc] = []  # killed, not yet gone (reap_idle reaps them)
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
    "Proc",
    "Worker",
    "WorkerFailed",
    "end",
    "end_all",
    "limit",
    "reap_idle",
    "send",
]
