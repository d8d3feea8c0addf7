"""The per-session unwinder: a process of its own, exec'd fresh by the agent (`python -I
-m adaptyst_top.agent.worker.unwind_stacks FD`) for the user whose processes a profile
samples. The agent's sampler hands it the kernel's events (registers and a copy of the
user stack); it reads the user's binaries and their call- frame tables with that user's
rights only, unwinds and counts (collectors/profile/tally.py), and answers the counts
when asked. A user's binary is hostile bytes: here, a bad table costs its user
`[unknown]` frames, and at worst this process, never the agent.

It takes the user's ids for good before it reads anything (open_files.become) and
bounds its own memory. Messages are framed (a 4-byte big-endian length, then the body):
b"E" + events (sampler.encode's, back to back), or b"P" + the rate as 4 bytes, which is
answered at once with the counts, ProfilePart's JSON. The agent believes none of it
(agent/core/unwinder.py). It exits when the agent closes its end.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import struct
import sys
import threading
from collections import deque

import orjson

from adaptyst_top.agent.worker.open_files import become, open_regular

FRAME = struct.Struct(">I")
RATE = struct.Struct(">I")
MAX_MESSAGE = 8 << 20  # a batch of events (the agent sends ~256 KiB at most)
MAX_BACKLOG = 64 << 20  # batches held while the counter is slow; past it they are dropped
MEMORY_LIMIT = 4 << 30  # address space: tables and maps of thousands of processes
MAX_ANSWER = 4 << 20  # the counts' JSON: the agent parses no more (agent/core/unwinder.py)


def _recv_exact(link: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = link.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(link: socket.socket) -> bytes:
    (n,) = FRAME.unpack(_recv_exact(link, FRAME.size))
    if n > MAX_MESSAGE:
        raise EOFError  # not the agent's: nothing more is read
    return _recv_exact(link, n)


class Worker:
    def __init__(self) -> None:
        from adaptyst_top.collectors.profile.sampler import decode
        from adaptyst_top.collectors.profile.tally import Tally

        self._decode = decode
        self.tally = Tally(open_regular)
        self.backlog: deque[bytes] = deque()
        self.held = 0  # bytes in the backlog
        self.dropped = 0  # batches dropped for a full backlog, events that failed
        self.ready = threading.Condition()

    def hand(self, batch: bytes) -> None:
        with self.ready:
            if self.held + len(batch) > MAX_BACKLOG:
                self.dropped += 1
                return
            self.backlog.append(batch)
            self.held += len(batch)
            self.ready.notify()

    def count(self) -> None:
        from adaptyst_top.collectors.profile.sampler import HEADER_BYTES

        while True:
            with self.ready:
                while not self.backlog:
                    self.ready.wait()
                batch = self.backlog.popleft()
                self.held -= len(batch)
            at = 0
            while at + HEADER_BYTES <= len(batch):
                size = int.from_bytes(batch[at + HEADER_BYTES - 4 : at + HEADER_BYTES], "little")
                event = self._decode(batch[at : at + HEADER_BYTES + size])
                at += HEADER_BYTES + size
                if event is None:
                    continue
                try:
                    self.tally.take(event)
                except Exception:  # a table no check foresaw: this event is lost only
                    self.dropped += 1

    def answer(self, hz: int) -> bytes:
        """The counts, within MAX_ANSWER: the interval's stacks past it are left out
        (their samples counted in `lost`), as the agent would refuse the whole."""
        part = self.tally.part(hz).to_json()
        part["lost"] = int(part.get("lost", 0)) + self.dropped
        data = orjson.dumps(part)
        stacks = part.get("stacks") or []
        while len(data) > MAX_ANSWER and stacks:
            cut = stacks[len(stacks) // 2 :]
            del stacks[len(stacks) // 2 :]
            part["lost"] += sum(int(s.get("samples", 0)) for s in cut) or len(cut)
            data = orjson.dumps(part)
        return data


def serve(link: socket.socket) -> None:
    worker = Worker()
    link.sendall(FRAME.pack(1) + b"R")  # ready: its imports done, its deadlines start
    threading.Thread(target=worker.count, name="unwind", daemon=True).start()
    while True:
        try:
            message = read_frame(link)
        except (EOFError, OSError):
            return
        if message[:1] == b"E":
            worker.hand(message[1:])
        elif message[:1] == b"P" and len(message) == 1 + RATE.size:
            (hz,) = RATE.unpack_from(message, 1)
            data = worker.answer(max(1, hz))
            link.sendall(FRAME.pack(len(data)) + data)
        else:
            return


def main(argv: list[str]) -> None:
    link = socket.socket(fileno=int(argv[1]))
    # Whose process this is comes first, from the agent, while still root.
    ids = json.loads(read_frame(link))
    become(int(ids["uid"]), int(ids["gid"]), [int(g) for g in ids["groups"]])
    os.chdir("/")
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    try:
        serve(link)
    finally:
        # The counting thread may be inside a table: it is not waited for.
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
