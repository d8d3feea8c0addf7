"""The agent's answer to `list`: the functions and USDT probes of a process or file
that this user may probe."""

from __future__ import annotations

import os
from typing import Any

from adaptyst_top.collectors.elf_info import NotELFError
from adaptyst_top.collectors.targets import TargetError, resolve_target
from adaptyst_top.runtime import agent_protocol as proto
from adaptyst_top.runtime.authorization import Peer, may_probe, may_read
from adaptyst_top.runtime.listing import entry_policy, list_objects
from adaptyst_top.runtime.session import SessionError


def list_for(peer: Peer, msg: dict[str, Any]) -> bytes:
    """What `list` shows, for a process or file this user may probe."""
    pid = proto.field(msg, "pid", int, optional=True)
    binary = proto.field(msg, "binary", str, optional=True)
    pattern = proto.field(msg, "pattern", str, optional=True) or "*"
    functions, usdt, every = (bool(msg.get(k)) for k in ("functions", "usdt", "all"))
    if (pid is None) == (binary is None):
        raise proto.ProtocolError("list: give either pid or binary")
    if pid is not None and (why := may_probe(peer, pid)):
        raise SessionError(why)
    try:
        if binary is not None:
            if "/" in binary and not os.path.isabs(binary):
                raise SessionError(f"{binary}: give the agent an absolute path")
            binary = binary if os.path.isabs(binary) else resolve_target(binary)
            if why := may_read(peer, binary):
                raise SessionError(why)
        policy = entry_policy() if functions else None
        objects = list_objects(pid, binary, pattern, functions, usdt, every, policy)
    except (TargetError, NotELFError, OSError) as exc:
        raise SessionError(str(exc)) from None
    return proto.encode("ok", objects=objects, policy_known=policy is not None)
