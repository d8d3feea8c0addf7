"""A user's ELF files parsed by a process of that user's (agent/worker/parse_elf.py),
never by the root process: the agent hands it the descriptor its opener opened and takes
back plain data, which agent/core/elf_check.py checks against the program headers it
reads itself. A parser that fails, lies or is late is killed; that costs its own user
one line. Answers are cached per user and file (a file's inode and times)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import orjson

from adaptyst_top.agent.core.authorization import Peer
from adaptyst_top.agent.core.elf_check import Lied, checked
from adaptyst_top.agent.core.kept_workers import FRAME, KeptWorkers, Worker, WorkerFailed, end
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, ElfReader, NotELFError
from adaptyst_top.system.readable import readable

# A library of 200,000 symbols takes seconds on a busy node; a parser past this is killed.
PARSE_TIMEOUT_S = 60.0
# An answer's bytes: OpenBLAS' 224,372 functions answer ~25 MiB.
MAX_ANSWER = 64 << 20
# Parsed files kept, in what they hold (held_bytes): per user (one user's files do not
# push out another's), and in all.
CACHE_PER_USER = 96 << 20
CACHE_ALL = 256 << 20
_DESCRIPTOR = re.compile(r"^/proc/self/fd/([0-9]+)$")
_KEPT = KeptWorkers(
    "a parser",
    [sys.executable, "-I", "-m", "adaptyst_top.agent.worker.parse_elf"],
    socket.SOCK_STREAM,
    spare=True,
)
_CACHE: OrderedDict[tuple[int, int, int, int, int, int], tuple[ElfInfo, int]] = OrderedDict()
_CACHE_LOCK = threading.Lock()


class _Gone(Exception):
    """A kept parser had exited (idle) before it read the request."""


def warm(uid: int, gid: int, groups: Sequence[int]) -> None:
    """UID's parser started ahead of her first request (KeptWorkers.warm)."""
    _KEPT.warm(uid, gid, groups)


def reader_for(peer: Peer) -> ElfReader:
    """What parses a file for PEER: its source is a /proc/self/fd/N the agent holds."""

    def read(source: str) -> ElfInfo:
        m = _DESCRIPTOR.match(source)
        if m is None:
            raise NotELFError(f"{source}: not a file opened for you")
        return elf_as(peer.uid, peer.gid, sorted(peer.groups), int(m[1]))

    return read


def listed_as(peer: Peer, source: str, path: str, asked: dict[str, object]) -> dict[str, object]:
    """What `list` shows of PATH (read at SOURCE, a /proc/self/fd/N the agent holds),
    made by PEER's parser (ASKED: pattern, functions, usdt, pid, verdicts): root does
    none of its per-function work, and keeps nothing of it. NotELFError in one line."""
    m = _DESCRIPTOR.match(source)
    if m is None:
        raise NotELFError(f"{source}: not a file opened for you")
    request: dict[str, object] = {"path": path, "list": asked}
    answer, _ = _ask_as(peer.uid, peer.gid, sorted(peer.groups), int(m[1]), path, request)
    if not isinstance(answer, dict) or not isinstance(answer.get("object"), dict):
        error = answer.get("error") if isinstance(answer, dict) else None
        raise NotELFError(error if isinstance(error, str) else f"{path}: unreadable")
    found: dict[str, object] = answer["object"]
    found["path"] = path  # as the agent names it
    return found


def elf_as(uid: int, gid: int, groups: Sequence[int], fd: int) -> ElfInfo:
    """The ELF file FD, parsed as UID:GID with GROUPS; NotELFError in one line."""
    path = os.readlink(f"/proc/self/fd/{fd}")
    st = os.fstat(fd)
    key = (uid, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    with _CACHE_LOCK:
        if (hit := _CACHE.get(key)) is not None:
            _CACHE.move_to_end(key)
            return hit[0]
    answer, size = _ask_as(uid, gid, groups, fd, path)
    try:
        info = checked(answer, fd, path)
    except Lied:
        _KEPT.end_all_of(uid)  # a parser that answered wrongly is not asked again
        raise
    with _CACHE_LOCK:
        _CACHE[key] = (info, held_bytes(info, size))
        _trim(uid)
    return info


# What a parsed file holds in the agent's memory, beyond its answer's bytes (names are
# held twice, raw and demangled): a FunctionSymbol and its tuple slot, measured at
# ~260 B a function with short names (tracemalloc, 120,000 functions: 31 MB for a 5 MB
# answer). Counted so, the caches bound what they hold, not what was sent.
OBJECT_BYTES = 200


def held_bytes(info: ElfInfo, answer_bytes: int) -> int:
    return OBJECT_BYTES * len(info.functions) + 2 * answer_bytes


def _trim(uid: int) -> None:
    """Drop the oldest answers past UID's share and past the whole cache's."""
    for owner, budget in ((uid, CACHE_PER_USER), (None, CACHE_ALL)):
        held = [k for k in _CACHE if owner is None or k[0] == owner]
        total = sum(_CACHE[k][1] for k in held)
        for k in held:
            if total <= budget:
                break
            total -= _CACHE.pop(k)[1]


def _ask_as(
    uid: int,
    gid: int,
    groups: Sequence[int],
    fd: int,
    path: str,
    request: dict[str, object] | None = None,
) -> tuple[object, int]:
    deadline = time.monotonic() + PARSE_TIMEOUT_S
    lock = _KEPT.user_lock(uid)
    if not lock.acquire(timeout=PARSE_TIMEOUT_S):
        raise NotELFError(f"{path}: uid {uid}'s earlier files took over {PARSE_TIMEOUT_S:g} s")
    key = (uid, gid, tuple(sorted(groups)))
    try:
        kept = _KEPT.take(key)
        if kept is not None:
            with contextlib.suppress(_Gone):  # exited idle a moment ago: a fresh one
                got = _ask(kept, fd, path, deadline, kept=True, request=request)
                _KEPT.keep(key, kept)
                return got
        try:
            parser = _KEPT.start(uid, gid, groups)
        except WorkerFailed as exc:
            raise NotELFError(str(exc)) from None
        got = _ask(parser, fd, path, deadline, kept=False, request=request)
        _KEPT.keep(key, parser)
        return got
    finally:
        lock.release()


def _ask(
    parser: Worker,
    fd: int,
    path: str,
    deadline: float,
    kept: bool,
    request: dict[str, object] | None = None,
) -> tuple[object, int]:
    """PARSER's answer for FD; it is ended on any failure (_Gone: a kept one had exited)."""
    try:
        data = json.dumps(request or {"path": path}).encode()
        try:
            socket.send_fds(parser.link, [FRAME.pack(len(data)) + data], [fd])
        except OSError:
            raise _Gone if kept else NotELFError(f"{path}: the parser is gone") from None
        head = _read(parser.link, FRAME.size, deadline, path, first=kept)
        (n,) = FRAME.unpack(head)
        if n > MAX_ANSWER:
            raise NotELFError(
                f"{path}: what it holds takes {n >> 20} MiB to say, over the agent's "
                f"{MAX_ANSWER >> 20} MiB: too large to list or probe through the agent"
            )
        try:
            return orjson.loads(_read(parser.link, n, deadline, path, first=False)), n
        except orjson.JSONDecodeError:
            raise NotELFError(f"{path}: the parser answered wrongly") from None
    except BaseException:
        end(parser)
        raise


def _read(link: socket.socket, n: int, deadline: float, path: str, first: bool) -> bytes:
    """N bytes of LINK by DEADLINE. FIRST: a kept parser that closed instead is _Gone."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        wait = deadline - time.monotonic()
        if wait <= 0 or not readable([link], wait):
            raise NotELFError(f"{path}: parsing took over {PARSE_TIMEOUT_S:g} s: given up")
        try:
            chunk = link.recv(min(n - got, 1 << 20))
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            if first and not got:
                raise _Gone
            raise NotELFError(f"{path}: the parser ended (the file may be too large to read)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


__all__ = ["PARSE_TIMEOUT_S", "elf_as", "listed_as", "reader_for"]
