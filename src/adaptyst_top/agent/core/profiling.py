"""The agent's profile requests: a rate checked off the wire, and the process list's
pick (`profile`), a process the user may probe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adaptyst_top.agent.core.authorization import Peer, hold_and_check, still_theirs
from adaptyst_top.agent.core.client import Client
from adaptyst_top.collectors.profile import DEFAULT_HZ, HZ_RANGE
from adaptyst_top.runtime import agent_protocol as proto
from adaptyst_top.runtime.sources import ActionError

NODE_WIDE = (
    "node-wide probes are for root and the agent's admin group; you may probe "
    "your own processes: give --pid PID, --job ID or -- CMD"
)


def profile_rate(msg: dict[str, Any]) -> int | None:
    """A request's profile rate (`open`'s profile_hz, `profile`'s hz): absent, or whole
    samples a second in HZ_RANGE; else ProtocolError."""
    name = "profile_hz" if msg["type"] == "open" else "hz"
    if msg.get(name) is None:
        return None
    return int(proto.bounded(msg, name, DEFAULT_HZ, *HZ_RANGE, whole=True))


def node_wide_refusal(client: Client) -> str | None:
    """Why CLIENT may not add probes now: a user's session with no target yet."""
    s = client.session
    if s is None or client.peer.privileged or s.pid is not None or s.options.target.job:
        return None
    return NODE_WIDE


def profile_request(
    client: Client, msg: dict[str, Any], node_pid: Callable[[Peer, int], int]
) -> bytes:
    """Profile the request's PID from now on (NODE_PID: the agent's own number for it).
    An untargeted session takes it as its target: what it adds later is scoped to it,
    and guarded."""
    hz = profile_rate(msg) or DEFAULT_HZ
    pid = node_pid(client.peer, proto.field(msg, "pid", int))
    with client.lock:
        session = client.session
        if session is None:
            raise ActionError(client.revoked or "open a session first")
        if session.pid is None and session.options.target.job is None:
            if why := hold_and_check(client.peer, client.target, pid):
                raise ActionError(why)
            session.pid = pid
        elif pid != session.pid and not client.peer.privileged:
            raise ActionError(f"this session watches PID {session.pid}: profile that one")
        elif why := still_theirs(client.peer, client.target, pid):
            raise ActionError(why)
        session.start_profile(pid, hz)
    return proto.encode("ok")
