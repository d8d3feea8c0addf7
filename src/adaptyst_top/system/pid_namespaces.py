"""A PID a client names, in the agent's own PID namespace. A client in another PID
namespace (a container, `unshare -p`) names its processes by that namespace's numbers:
PID 2 there is not the agent's PID 2 (kthreadd). The kernel gives the client's own PID
in the agent's namespace (SO_PEERCRED); from it the client's namespace is known, and a
PID of that namespace is found by the NSpid line of the processes in it."""

from __future__ import annotations

import os
import threading

_REMEMBERED = 1024
_FOUND: dict[tuple[int, int], int] = {}  # (namespace, its PID) -> the node's PID
_LOCK = threading.Lock()


class PidNamespaceError(Exception):
    """Why a client's PID cannot be found in the agent's namespace, in one line."""


def _ns(pid: int | str) -> int:
    return os.stat(f"/proc/{pid}/ns/pid").st_ino


def _nspid(pid: str) -> list[int]:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    return []


def in_agents_namespace(peer_pid: int, pid: int) -> int:
    """PID as the client at PEER_PID (a PID in the agent's namespace) means it: the same
    number when the client shares the agent's namespace, else the agent's number of the
    process that is PID in the client's. PidNamespaceError when there is none."""
    try:
        theirs = _ns(peer_pid)
    except OSError:
        raise PidNamespaceError(
            f"your process {peer_pid} is gone: PID {pid} not looked up"
        ) from None
    if theirs == _ns("self"):
        return pid
    key = (theirs, pid)
    with _LOCK:
        known = _FOUND.get(key)
    if known is not None and _still(known, theirs, pid):
        return known
    found = _scan(theirs, pid)
    with _LOCK:
        _FOUND[key] = found
        while len(_FOUND) > _REMEMBERED:
            _FOUND.pop(next(iter(_FOUND)))
    return found


def _still(node_pid: int, ns: int, pid: int) -> bool:
    """Whether NODE_PID is still PID of namespace NS (not a later process's number)."""
    try:
        ids = _nspid(str(node_pid))
        return len(ids) > 1 and ids[-1] == pid and _ns(node_pid) == ns
    except (OSError, ValueError):
        return False


def _scan(theirs: int, pid: int) -> int:
    """Every process of the node looked at: a lookup costs a pass over /proc, so each
    one found is remembered (checked again when used)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ids = _nspid(name)
            if len(ids) > 1 and ids[-1] == pid and _ns(name) == theirs:
                return int(name)
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
    raise PidNamespaceError(
        f"PID {pid} of your PID namespace is not one the agent can find: give the PID as "
        "the node's namespace numbers it"
    )


__all__ = ["PidNamespaceError", "in_agents_namespace"]
