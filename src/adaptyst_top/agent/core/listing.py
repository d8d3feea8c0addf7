"""The agent's answers to `list` and to the picker (`candidates`): the functions and
USDT probes of a process or file that this user may probe, read from files opened and
parsed as that user, the process asked about again once they are open."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from adaptyst_top.agent.core.authorization import Peer, may_probe, open_for, unreadable
from adaptyst_top.agent.core.parser import listed_as, reader_for
from adaptyst_top.collectors.probes.elf.elf_info import NotELFError, read_elf
from adaptyst_top.runtime.listing import Candidate, candidates, entry_policy, list_objects
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.session import SessionError
from adaptyst_top.system.pid_namespaces import PidNamespaceError, in_agents_namespace
from adaptyst_top.system.targets import TargetError, mapped_files, resolve_target

# Files opened at once for one answer; a process mapping more is listed that far (its
# program first): a user's process of 10,000 mappings does not spend the agent's fds.
MAX_FILES = 256


@contextlib.contextmanager
def opened_as(peer: Peer, paths: list[str]) -> Iterator[dict[str, str] | None]:
    """Where each of PATHS is read for PEER: the descriptors opened as them (paths they
    may not read are left out), closed at the end; None for root and the admin group."""
    if peer.privileged:
        yield None
        return
    fds, why = open_for(peer, paths[:MAX_FILES])
    if why is not None:
        raise SessionError(why)
    try:
        yield {
            p: f"/proc/self/fd/{fd}" for p, fd in zip(paths, fds, strict=False) if fd is not None
        }
    finally:
        for fd in fds:
            if fd is not None:
                os.close(fd)


def list_for(peer: Peer, msg: dict[str, Any]) -> bytes:
    """What `list` shows, for a process or file this user may probe."""
    pid = proto.field(msg, "pid", int, optional=True)
    binary = proto.field(msg, "binary", str, optional=True)
    pattern = proto.field(msg, "pattern", str, optional=True) or "*"
    functions, usdt, every = (bool(msg.get(k)) for k in ("functions", "usdt", "all"))
    if (pid is None) == (binary is None):
        raise proto.ProtocolError("list: give either pid or binary")
    if pid is not None:
        try:
            pid = in_agents_namespace(peer.pid, pid)
        except PidNamespaceError as exc:
            raise SessionError(str(exc)) from None
    if pid is not None and (why := may_probe(peer, pid)):
        raise SessionError(why)
    try:
        if binary is not None and "/" in binary and not os.path.isabs(binary):
            raise SessionError(f"{binary}: give the agent an absolute path")
        if binary is not None and not os.path.isabs(binary):
            binary = resolve_target(binary)  # a library or program name: nothing private
        paths = [binary] if binary is not None else mapped_files(pid)  # type: ignore[arg-type]
        policy = entry_policy() if functions else None
        with opened_as(peer, paths) as sources:
            if binary is not None and sources is not None and binary not in sources:
                raise SessionError(unreadable(binary))
            if pid is not None and (why := may_probe(peer, pid)):
                raise SessionError(why)  # the PID changed hands while its files opened
            read = read_elf if sources is None else reader_for(peer)
            # A user's files are described by that user's parser: per-function work (a
            # million names, globs and entry checks) is theirs, never root's.
            verdicts = (
                None if policy is None else {k: asdict(v) for k, v in policy.verdicts.items()}
            )

            def theirs(path: str, source: str, want: bool) -> dict[str, Any]:
                asked = {"pattern": pattern, "functions": want, "usdt": usdt}
                return listed_as(peer, source, path, {**asked, "pid": pid, "verdicts": verdicts})

            objects = list_objects(
                pid,
                binary,
                pattern,
                functions,
                usdt,
                every,
                policy,
                sources,
                read,
                None if sources is None else theirs,
            )
    except (TargetError, NotELFError, OSError) as exc:
        raise SessionError(str(exc)) from None
    return proto.encode("ok", objects=objects, policy_known=policy is not None)


def candidates_for(peer: Peer, pid: int | None) -> list[Candidate]:
    """The picker's list for a session of PEER's on PID: what its process maps, read
    as PEER (whose process it was asked to be just before)."""
    if pid is None:
        return []
    try:
        files = mapped_files(pid)
    except TargetError:
        return []
    with opened_as(peer, files) as sources:
        if may_probe(peer, pid) is not None:
            return []
        read = read_elf if sources is None else reader_for(peer)
        return candidates(files, pid, entry_policy(), sources, read)
