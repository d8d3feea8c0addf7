"""What a user of the agent may probe: decided by the agent from the kernel's own facts,
never from anything a client says.

A non-root user may probe a process only when the kernel would let them read it with
ptrace: its real, effective, saved and filesystem uids are the user's, its real,
effective and saved gids the user's group, and it is dumpable (the files in /proc/PID
of one that is not are root's: a setuid program, or one that said so itself).
Root and the members of the agent's admin group may probe anything, node-wide too.
A file a probe names must be one the user could read. A Slurm job is its owner's
(the controller's word), and each of its processes is asked for as it joins.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
import time
from dataclasses import dataclass
from functools import partial

from adaptyst_top.agent.core.opener import NotOpened, open_as
from adaptyst_top.agent.core.unwinder import counts_for
from adaptyst_top.collectors.probes.engine.attach_account import AttachAccount
from adaptyst_top.collectors.probes.kinds import kind_of, parse_spec
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import ProbeSpecError
from adaptyst_top.runtime.session_options import Tenant
from adaptyst_top.system.held_processes import HeldProcesses
from adaptyst_top.system.line_socket import peer_credentials
from adaptyst_top.system.pinned_files import PinnedFiles
from adaptyst_top.system.slurm_jobs import JobError, job_info
from adaptyst_top.system.targets import (
    CONTAINER_PATH,
    TargetError,
    mount_root,
    process_start,
    resolve_target,
)

SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux 4.13; Python names it in 3.13


@dataclass(frozen=True)
class Peer:
    """Who is at the other end of a connection (SO_PEERCRED: the kernel's word)."""

    pid: int
    uid: int
    gid: int
    groups: frozenset[int]
    privileged: bool  # root, or in the admin group

    @property
    def who(self) -> str:
        return _user_name(self.uid)


def peer_of(conn: socket.socket, admin_gid: int | None) -> Peer:
    """Who CONN's other end is, as the kernel took it at connect(): its groups too, so
    a client that exits and leaves its PID to an admin's process never passes for one."""
    pid, uid, gid = peer_credentials(conn)
    groups = frozenset(_peer_groups(conn)) | {gid}
    privileged = uid == 0 or (admin_gid is not None and admin_gid in groups)
    return Peer(pid, uid, gid, groups, privileged)


def _peer_groups(conn: socket.socket) -> list[int]:
    size = 4 * 64
    while True:
        try:
            raw = conn.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, size)
        except OSError as exc:
            if exc.errno != errno.ERANGE or size >= 4 * 65536:
                raise
            size *= 4
            continue
        return list(struct.unpack(f"{len(raw) // 4}I", raw))


def _ids(pid: int, which: str) -> list[int]:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(which + ":"):
                return [int(x) for x in line.split()[1:]]
    raise OSError(f"no {which} line")


def _dump_owner(pid: int) -> int | None:
    """Who /proc says may read PID (its owner while dumpable, else root), from a live
    thread: once the leader thread has exited, its own /proc files read as root's
    whatever the process is. None for a zombie (no live thread)."""
    if _state(f"/proc/{pid}/status") != "Z":
        return os.stat(f"/proc/{pid}/status").st_uid
    for tid in os.listdir(f"/proc/{pid}/task"):
        path = f"/proc/{pid}/task/{tid}/status"
        with contextlib.suppress(OSError):
            if _state(path) != "Z":
                return os.stat(path).st_uid
    return None


def _user_namespace(pid: int | str) -> int:
    return os.stat(f"/proc/{pid}/ns/user").st_ino


def _state(path: str) -> str:
    with open(path) as f:
        for line in f:
            if line.startswith("State:"):
                return line.split()[1]
    return "?"


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


# A process in the middle of an ordinary execve reads as not dumpable for a moment (its
# /proc files owned by root): the agent's exec check caught it in 13 of 20 commands
# launched under load, and ended their probes (0 of 30 calls counted). Its uids settle
# at once (a setuid exec is refused without waiting); only that state is asked again.
EXEC_SETTLE_S = 0.25


def may_probe(peer: Peer, pid: int, settle_s: float = 0.0) -> str | None:
    """None when PEER may probe PID; else why not, in one line. settle_s: how long a
    process that reads as not dumpable, but is all the user's, is looked at again."""
    why = _may_probe(peer, pid)
    deadline = time.monotonic() + settle_s
    while why is not None and why.endswith(_NOT_DUMPABLE) and time.monotonic() < deadline:
        time.sleep(0.002)
        why = _may_probe(peer, pid)
    return why


_NOT_DUMPABLE = "is not dumpable (a setuid program, or it said so): it may not be probed"


def _may_probe(peer: Peer, pid: int) -> str | None:
    if peer.privileged:
        return None
    try:
        uids, gids = _ids(pid, "Uid"), _ids(pid, "Gid")
        owner = _dump_owner(pid)
    except (OSError, ValueError):
        return f"PID {pid}: no such process"
    if owner is None:  # "no such process": the guard leaves a session's final read to it
        return f"PID {pid}: no such process (a zombie: it has exited)"
    # Whose it is first: another's is refused by that, whatever else cannot be read of it
    # (even root may not read init's namespace in a container).
    if any(u != peer.uid for u in uids):
        who = _user_name(uids[0]) if uids[0] == uids[1] else f"{_user_name(uids[1])} (setuid)"
        return f"PID {pid} belongs to {who}; you may probe your own processes"
    if any(g != peer.gid and g not in peer.groups for g in gids[:3]):
        return f"PID {pid} runs with a group that is not yours; you may probe your own processes"
    try:
        own_namespace = _user_namespace(pid) == _user_namespace("self")
    except OSError:
        return f"PID {pid}: its user namespace cannot be read: it may not be probed"
    if not own_namespace:
        # Root of a user namespace has capabilities there: the in-kernel check that
        # keeps a user's probes out of setuid programs would count none of its calls.
        return (
            f"PID {pid} runs in a user namespace of its own (a rootless container): the "
            "agent cannot count its calls; probe a process outside it, or ask an admin"
        )
    if owner != peer.uid:
        return f"PID {pid} {_NOT_DUMPABLE}"
    return None


def hold_and_check(peer: Peer, held: HeldProcesses, pid: int) -> str | None:
    """Hold PID (the process it is now), then ask the rule of it: None when PEER may
    probe it (a refused one is let go: refusals hold no descriptor)."""
    start = process_start(pid)
    if start is None or not held.hold(pid, start):
        return f"no such process: PID {pid}"
    why = may_probe(peer, pid)
    if why is not None:
        held.release(pid)
    return why


def still_theirs(peer: Peer, held: HeldProcesses, pid: int | None) -> str | None:
    """None while PID is still the process HELD since its check, and still PEER's."""
    if pid is None or peer.privileged:
        return None
    if not held.alive(pid):
        return f"PID {pid} has exited: its session reads no process any more"
    return may_probe(peer, pid)


def unreadable(path: str) -> str:
    return f"{path}: no such file, or one you may not read, so you may not probe it"


def _may_read_inside(peer: Peer, path: str, root: str, inner: str) -> str | None:
    """Whether PEER could read a file in a container's tree, component by component and
    never through a symbolic link: an absolute link there would be followed from the
    host's root (the agent's), to a file the container never had. (The file is then
    opened as the user all the same: this only says why not, and keeps to the tree.)"""
    parts = inner.split("/")
    for depth in range(2, len(parts) + 1):
        here = root + "/".join(parts[:depth])
        try:
            st = os.lstat(here)
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        if stat.S_ISLNK(st.st_mode):
            return f"{inner}: a symbolic link in a container is not followed; give the file itself"
        last = depth == len(parts)
        bits = (
            (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
            if last
            else (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
        )
        if not _allowed(peer, st, *bits):
            return f"{inner}: you may not read it in your container, so you may not probe it"
    return None


def _allowed(peer: Peer, st: os.stat_result, user: int, group: int, other: int) -> bool:
    if st.st_uid == peer.uid:
        return bool(st.st_mode & user)
    if st.st_gid == peer.gid or st.st_gid in peer.groups:
        return bool(st.st_mode & group)
    return bool(st.st_mode & other)


def spec_refusal(
    peer: Peer, text: str, pid: int | None, pinned: PinnedFiles | None = None
) -> str | None:
    """Why a spec may not be asked for (malformed, or naming a file the user could not
    read); None when it may, its file then held open in PINNED."""
    try:
        spec = parse_spec(text)
    except ProbeSpecError as exc:
        return exc.one_line
    if peer.privileged:
        return None
    if "/" in spec.target and not os.path.isabs(spec.target):
        return f"{text}: give the agent an absolute path"
    try:
        target = kind_of(spec).target_name(spec, pid)
    except ProbeError as exc:
        return str(exc)
    if why := pin_file(peer, target, pid, pinned):
        return why
    for other in kind_of(spec).instead_targets(spec):  # where the target has one
        pin_file(peer, other, pid, pinned)
    return None


def pin_file(peer: Peer, target: str, pid: int | None, pinned: PinnedFiles | None) -> str | None:
    """Open the file TARGET names (a path, or a library or program name as the engine
    resolves it, for PID) as PEER, and hold it in PINNED; None when done, else why not,
    the same whether it is missing or hidden from them."""
    try:
        if "/" in target and not (pid is not None and mount_root(pid)):
            path = target  # resolved by the kernel, as the user: no look as root first
        else:
            path = resolve_target(target, pid)
    except TargetError as exc:
        # A path: missing or hidden answer alike. A library name: nothing private in it.
        return unreadable(target) if "/" in target else str(exc)
    if (inside := CONTAINER_PATH.match(path)) and (
        why := _may_read_inside(peer, target, f"/proc/{inside[1]}/root", inside[2])
    ):
        return why
    fds, why = open_for(peer, [path])
    if why is not None:
        return why
    if fds[0] is None:
        return unreadable(target)
    if pinned is None:
        os.close(fds[0])
    else:  # the path the kernel gives the file now; a container's as it was named
        shown = path if inside else os.readlink(f"/proc/self/fd/{fds[0]}")
        pinned.pin(target, fds[0], shown)
    return None


def open_for(peer: Peer, paths: list[str]) -> tuple[list[int | None], str | None]:
    """PATHS opened as PEER (None where they may not read it), or why none was."""
    try:
        return open_as(peer.uid, peer.gid, sorted(peer.groups), paths), None
    except NotOpened as exc:
        return [], str(exc)


def job_refusal(peer: Peer, job: str) -> str | None:
    """A user targets their own jobs; root and the admin group any. None when allowed
    (Slurm's commands absent: each process is still asked for as it joins)."""
    try:
        info = job_info(job)
    except JobError as exc:
        return str(exc)
    if peer.privileged or info.owner_uid is None or info.owner_uid == peer.uid:
        return None
    return f"job {info.job_id} belongs to user {info.owner}; you may target your own jobs"


def tenant_of(peer: Peer, pinned: PinnedFiles | None, account: AttachAccount | None) -> Tenant:
    """A session's bounds for PEER: root's are a local session's, a user's are the rule."""
    if peer.privileged:
        return Tenant(pinned=pinned, users_own=False)
    # Each process that joins (a child, a job's new task) is asked again.
    admit = partial(may_probe, peer, settle_s=EXEC_SETTLE_S)
    # A user's binaries and stacks are unwound by a process of theirs, never here.
    counts = partial(counts_for, peer.uid, peer.gid, sorted(peer.groups))
    return Tenant(admit, account, peer.uid, pinned, counts, users_own=False)
