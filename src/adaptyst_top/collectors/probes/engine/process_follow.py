"""Following a target's children: the processes a probed process starts join its probes.

A uprobe attached for one PID fires in that process only: a child it forks takes no
trap, and is not counted, until probes are attached for the child too. The kernel says
when a process forks, execs and exits (the `sched` tracepoints). One small BPF program
keeps the followed processes in a map: a child of a followed process is followed at
once, in the kernel (so that a grandchild forked before user space has caught up is not
lost), and each fork, exec and exit of a followed process goes to user space through a
ring buffer, where the engine attaches the probes for a new child, re-checks who owns a
process that exec'd, and drops one that exited.

Calls a child makes before its probes are attached are not seen: the delay from fork
to attached is measured by tests/system/ebpf/test_follow.py and reported in the engine's
`follow_delay_ms`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from adaptyst_top.collectors.probes.bpf.libbpf import BpfObject

MAX_FOLLOWED = 65536
# How long a poll waits when nothing happens. close() wakes it at once (_wake_poll), so
# this is only the fallback when that cannot be done: each timeout is a wake-up of the
# thread, and a wake-up after an idle wait costs ~0.15 ms of CPU here.
POLL_MS = 5_000

# What close() spawns to wake the poll: a fixed system path, never one looked up in
# PATH (as root, a directory of PATH can be another user's). Only its fork counts: if
# it were missing, the failed exec would still have been a fork.
_TRUE = "/bin/true"

EventKind = Literal["fork", "exec", "exit"]
_KINDS: tuple[EventKind, ...] = ("fork", "exec", "exit")

# The program (bpf/follow.bpf.c), compiled with the package.
_OBJECT = Path(__file__).resolve().parents[1] / "bpf" / "follow.bpf.o"
_PROGRAMS = ("follow_fork", "follow_exec", "follow_exit")
_EVENT = struct.Struct("<III")  # struct event { u32 kind; u32 pid; u32 parent; }


@dataclass(frozen=True)
class ProcessEvent:
    kind: EventKind
    pid: int
    parent: int = 0  # for a fork: the followed process that forked


class ProcessFollower:
    """Tells `on_event` of every fork, exec and exit of the followed processes and of
    their descendants, from its own thread, until close().

    Two threads: one polls the ring buffer and only queues what it reads, one hands it
    to `on_event`, which may take the engine's lock. So close() never waits on a poll
    stuck behind that lock (close is called with the lock held)."""

    def __init__(
        self,
        pids: Iterable[int],
        on_event: Callable[[ProcessEvent], None],
    ) -> None:
        obj = BpfObject(str(_OBJECT), _PROGRAMS, {"followed": (ctypes.c_uint, ctypes.c_ubyte)})
        try:
            obj.size_map("followed", MAX_FOLLOWED)
            obj.select(dict.fromkeys(_PROGRAMS))
            obj.load()
            self._map = obj["followed"]
            for pid in pids:
                self.add(pid)
            obj.attach_all()
            self._ring = obj.ring_buffer("events", self._callback)
        except BaseException:
            obj.cleanup()
            raise
        self._bpf = obj
        self._on_event = on_event
        self._stop = threading.Event()
        self._events: queue.SimpleQueue[ProcessEvent | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._poll, name="process-follower", daemon=True)
        self._handler = threading.Thread(target=self._hand_on, name="process-events", daemon=True)
        self._thread.start()
        self._handler.start()

    def add(self, pid: int) -> None:
        self._map[ctypes.c_uint(pid)] = ctypes.c_ubyte(1)

    def discard(self, pid: int) -> None:
        with contextlib.suppress(KeyError, OSError):  # OSError: closed meanwhile
            del self._map[ctypes.c_uint(pid)]

    def _callback(self, data: bytes) -> None:
        kind, pid, parent = _EVENT.unpack_from(data)
        if kind < len(_KINDS):
            self._events.put(ProcessEvent(_KINDS[kind], pid, parent))

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._ring.poll(POLL_MS)
        with contextlib.suppress(Exception):
            self._bpf.cleanup()  # here: never while a poll runs

    def _hand_on(self) -> None:
        while (event := self._events.get()) is not None:
            with contextlib.suppress(Exception):  # a failing handler must not stop the rest
                self._on_event(event)

    def close(self) -> None:
        """Stops both threads; the BPF program is gone when this returns (at the latest
        within one poll, POLL_MS, if the poll could not be woken)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._events.put(None)  # the handler ends here: nothing told after this
        if threading.current_thread() is not self._thread:
            self._wake_poll()
            self._thread.join(POLL_MS / 1000 * 2)

    def _wake_poll(self) -> None:
        """An event in the ring buffer now, so that the poll returns and sees the stop:
        this process is followed for a moment and spawns a child that exits at once,
        which the fork tracepoint tells. What it tells comes after the handler's end and
        is dropped. A spawned process, not a thread: starting a Python thread takes the
        threading module's locks, and close() can run anywhere (with the engine's lock
        held, on a thread a signal started, while the interpreter winds down)."""
        me = os.getpid()
        try:
            self.add(me)
        except Exception:  # a full map: the poll ends at its timeout
            return
        try:
            child = os.posix_spawn(_TRUE, [_TRUE], {})
            os.waitpid(child, 0)
        except OSError:  # no process to be had now: the same
            pass
        finally:
            self.discard(me)


def descendants(pids: Iterable[int]) -> list[int]:
    """The processes started by PIDS, their children's, and so on (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def is_thread(pid: int) -> bool:
    """Whether PID is a thread (not the first) of some process: not a process to follow."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1]) != pid
    except (OSError, ValueError):
        pass
    return True  # gone already: nothing to follow


__all__ = ["ProcessEvent", "ProcessFollower", "descendants", "is_thread"]
