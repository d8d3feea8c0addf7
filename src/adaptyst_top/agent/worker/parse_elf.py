"""The per-user parser: a process of its own, exec'd fresh by the agent for one user
(`python -I -m adaptyst_top.agent.worker.parse_elf FD`), that parses the ELF files the
agent hands it (descriptors the user's opener opened) and demangles their names, with
that user's rights only; it serves that user's requests in turn and exits after IDLE_S
without one.

It takes the user's ids for good before it reads a request, as the opener does
(open_files.become), and bounds its own memory: a hostile file costs its user a
one-line error and this process, never the agent. The agent believes nothing it says:
it reads the program headers itself and places every address by them
(agent/core/elf_check.py).

Messages are framed (a 4-byte big-endian length, then JSON). A request is
{"path": shown} with the descriptor attached; the answer is
{"functions": [[raw, source, address, size, ifunc], ...],
 "usdt": [[provider, name, address, semaphore, arguments], ...], "stripped": bool}
or {"error": one line}. A request with "list": {"pattern", "functions", "usdt", "pid",
"verdicts"} is answered {"object": what `list` shows of the file} (runtime/listing's
describe, its first MAX_LISTED functions): the per-function work of a listing (names,
globs, entry checks) is the user's process's, never root's. The agent passes it on
unchecked: it is its own user's answer, to that user.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import struct
import sys
from typing import TYPE_CHECKING

import orjson

from adaptyst_top.agent.worker.open_files import IDLE_S, asked, become

if TYPE_CHECKING:
    from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo

FRAME = struct.Struct(">I")
MAX_REQUEST = 64 * 1024
MEMORY_LIMIT = 4 << 30  # address space: pyelftools on a 200,000-symbol library needs < 1 GiB
# The longest symbol name answered: C++ templates run long (libstdc++'s longest is 1,142);
# a function named longer is left out, as the agent would refuse it.
MAX_NAME = 4096
MAX_SOURCE = 4 * MAX_NAME  # a demangled name longer (substitutions expand) shows as mangled


def _recv_exact(link: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = link.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_request(link: socket.socket) -> tuple[dict[str, object], int | None]:
    """One framed request and the descriptor that came with it."""
    head, fds, _, _ = socket.recv_fds(link, FRAME.size, 1, socket.MSG_CMSG_CLOEXEC)
    if not head:
        raise EOFError
    head += _recv_exact(link, FRAME.size - len(head))
    (n,) = FRAME.unpack(head)
    if n > MAX_REQUEST:
        sys.exit(4)
    msg = json.loads(_recv_exact(link, n))
    return (msg if isinstance(msg, dict) else {}), (fds[0] if fds else None)


MAX_LISTED = 100_000  # functions of one file in a listing's answer (~100 B each)
# The last file parsed, by its identity, in this user's own memory (this process lives
# IDLE_S after its last request).
_KEPT: dict[tuple[int, int, int, int], tuple[str, ElfInfo]] = {}


def _parsed(fd: int, path: str) -> tuple[int, ElfInfo]:
    """The file FD (consumed) opened anew, and what it holds, with its debug file's names
    (found as the user). The descriptor handed over shares its offset with the agent's:
    reading through it would move theirs. NotELFError, OSError, MemoryError."""
    from adaptyst_top.collectors.probes.elf.debug_names import with_debug_names
    from adaptyst_top.collectors.probes.elf.elf_info import NotELFError, parse_elf

    try:
        mine = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
    try:
        st = os.fstat(mine)
        identity = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size)
        if (kept := _KEPT.get(identity)) is not None and kept[0] == path:
            return mine, kept[1]
        f = os.fdopen(os.dup(mine), "rb")
        with f:
            if f.read(4) != b"\x7fELF":
                raise NotELFError(f"{path}: not an ELF file")
            f.seek(0)
            info = parse_elf(f, path, identity)
        # A stripped file's debug file (its build ID, its link, debuginfod), as the user.
        info = with_debug_names(info, f"/proc/self/fd/{mine}", path, beside=True)
        _KEPT.clear()  # the last file only: a listing asked again, or by another pattern
        _KEPT[identity] = (path, info)
        return mine, info
    except BaseException:
        os.close(mine)
        raise


def _failed(path: str, exc: BaseException) -> dict[str, object]:
    if isinstance(exc, MemoryError):
        return {"error": f"{path}: too large to read"}
    return {"error": str(exc).splitlines()[0] if str(exc) else "unreadable"}


def listing(fd: int | None, path: str, asked: dict[str, object]) -> dict[str, object]:
    """What `list` shows of the file FD (ASKED: the listing's request)."""
    from adaptyst_top.collectors.probes.elf.elf_info import NotELFError
    from adaptyst_top.collectors.probes.safety.entry_safety import EntryPolicy, Verdict
    from adaptyst_top.runtime.listing import describe

    if fd is None:
        return {"error": f"{path}: no file was handed over"}
    try:
        mine, info = _parsed(fd, path)
    except (NotELFError, OSError, MemoryError) as exc:
        return _failed(path, exc)
    try:
        verdicts, pid, pattern = (asked.get(k) for k in ("verdicts", "pid", "pattern"))
        policy = None
        if isinstance(verdicts, dict):
            policy = EntryPolicy({k: Verdict(**v) for k, v in verdicts.items()})
        found = describe(
            path,
            pattern if isinstance(pattern, str) else "*",
            bool(asked.get("functions")),
            bool(asked.get("usdt")),
            policy,
            pid if isinstance(pid, int) else None,
            f"/proc/self/fd/{mine}",
            lambda _source: info,
        )
    except (NotELFError, OSError, TypeError, MemoryError) as exc:
        return _failed(path, exc)
    finally:
        os.close(mine)
    functions = found.get("functions")
    if isinstance(functions, list) and len(functions) > MAX_LISTED:
        found["functions"], found["more"] = functions[:MAX_LISTED], len(functions) - MAX_LISTED
    return {"object": found}


def answer(fd: int | None, path: str) -> dict[str, object]:
    # Imported after the ids are taken: the parsers run as the user only.
    from adaptyst_top.collectors.probes.elf.demangle import demangle
    from adaptyst_top.collectors.probes.elf.elf_info import NotELFError

    if fd is None:
        return {"error": f"{path}: no file was handed over"}
    try:
        mine, info = _parsed(fd, path)
        os.close(mine)
    except (NotELFError, OSError, MemoryError) as exc:
        return _failed(path, exc)
    return {
        "functions": [
            [
                s.name,
                _source(demangle(s.name).source, s.name),
                s.address,
                s.size,
                s.ifunc,
                s.by_address,
            ]
            for s in info.functions
            if len(s.name) <= MAX_NAME
        ],
        "usdt": [[u.provider, u.name, u.address, u.semaphore, u.arguments] for u in info.usdt],
        "stripped": info.stripped,
    }


def _source(source: str, raw: str) -> str:
    return source if len(source) <= MAX_SOURCE else raw


def serve(link: socket.socket) -> None:
    """Requests until IDLE_S pass without one, or the agent closes its end."""
    while asked(link, IDLE_S):
        try:
            request, fd = read_request(link)
        except EOFError:
            return
        path = request.get("path")
        path = path if isinstance(path, str) else "?"
        wanted = request.get("list")
        found = listing(fd, path, wanted) if isinstance(wanted, dict) else answer(fd, path)
        data = orjson.dumps(found)
        link.sendall(FRAME.pack(len(data)) + data)


def _import_parsers() -> None:
    """The parsers' and demangler's code loaded: a spare (agent/core/kept_workers.py) has
    it loaded before it is told whose it is, so her first request does not wait on it.
    Their modules' own code only: nothing of a user's is read before her ids are taken."""
    import adaptyst_top.collectors.probes.elf.debug_names
    import adaptyst_top.collectors.probes.elf.demangle
    import adaptyst_top.collectors.probes.elf.elf_info
    import adaptyst_top.collectors.probes.safety.entry_safety
    import adaptyst_top.runtime.listing  # noqa: F401


def main(argv: list[str]) -> None:
    link = socket.socket(fileno=int(argv[1]))
    _import_parsers()
    # Whose parser this is comes next, from the agent, while still root.
    (n,) = FRAME.unpack(_recv_exact(link, FRAME.size))
    ids = json.loads(_recv_exact(link, min(n, MAX_REQUEST)))
    become(int(ids["uid"]), int(ids["gid"]), [int(g) for g in ids["groups"]])
    os.chdir("/")
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    serve(link)


if __name__ == "__main__":
    main(sys.argv)
