"""The agent's profile requests: a rate checked off the wire, and the process list's
pick (`profile`), a process the user may probe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adaptyst_top.agent.core.authorization import (
    EXEC_SETTLE_S,
    Peer,
    hold_and_check,
    may_probe,
    still_theirs,
)
from adaptyst_top.agent.core.client import Client
from adaptyst_top.collectors.profile import DEFAULT_HZ
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.sources import ActionError

NODE_WIDE = (
    "node-wide probes are for root and the agent's admin group; you may probe "
    "your own processes: give --pid PID, --job ID or -- CMD"
)


def node_wide_refusal(client: Client) -> str | None:
    """Why CLIENT may not add probes now: a user's session with no target yet."""
    s = client.session
    if s is None or client.peer.privileged or s.pid is not None or s.options.target.job:
        return None
    return NODE_WIDE


def profile_request(
    client: Client,
    msg: dict[str, Any],
    node_pid: Callable[[Peer, int], int],
    check_room: Callable[[], None],
) -> bytes:
    """Profile the request's PID from now on (NODE_PID: the agent's own number for it;
    CHECK_ROOM: SessionError when the user holds all the modules they may). An
    untargeted session takes it as its target: what it adds later is scoped to it, and
    guarded."""
    hz = proto.profile_rate(msg) or DEFAULT_HZ
    pid = node_pid(client.peer, proto.field(msg, "pid", int))
    with client.lock:
        session = client.session
        if session is None or client.revoked:
            raise ActionError(client.revoked or "open a session first")
        untargeted = session.pid is None
        if session.options.target.job is not None:
            raise ActionError("a job's session profiles with --profile when it opens")
        if untargeted:
            if why := hold_and_check(client.peer, client.target, pid):
                raise ActionError(why)
        elif pid != session.pid and not client.peer.privileged:
            raise ActionError(f"this session watches PID {session.pid}: profile that one")
        elif why := still_theirs(client.peer, client.target, pid):
            raise ActionError(why)
        now = session.profiler
        # As it is, and counting (its unwinder has not failed): no new compile.
        if (
            now is not None
            and now.asked_hz == hz
            and not untargeted
            and not getattr(now.counts, "note", "")
        ):
            return proto.encode("ok")
        if session.profiler is None:  # a new module (one replaced is the same count)
            check_room()
        session.start_profile(pid, hz)
        # The process could have changed hands during the compile: asked again.
        if why := may_probe(client.peer, pid, EXEC_SETTLE_S):
            session.close_profile()
            if untargeted:
                client.target.release(pid)
            raise ActionError(why)
        if untargeted:
            session.pid = pid  # what it adds from now on is scoped to it, and guarded
    return proto.encode("ok")
