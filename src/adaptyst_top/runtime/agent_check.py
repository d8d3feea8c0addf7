"""doctor's `agent` line: is a node agent there, and what may this user do with it."""

from __future__ import annotations

import os
from pathlib import Path

from adaptyst_top.runtime.agent_client import AgentConnection, AgentUnavailable
from adaptyst_top.runtime.agent_defaults import DEFAULT_SOCKET
from adaptyst_top.system.capability import Capability

INSTALL = "an admin installs systemd/adaptyst-top-agent.service (docs/install.md: the node agent)"


def check_agent(path: str | None) -> Capability:
    socket_path = path or str(DEFAULT_SOCKET)
    root = os.geteuid() == 0
    if path is None and not Path(socket_path).is_socket():
        if root:
            return Capability("agent", "ok", "none here; as root the probes attach in-process")
        return Capability(
            "agent", "missing", f"no agent at {socket_path}: probes need root", INSTALL
        )
    try:
        AgentConnection(socket_path).close()
    except AgentUnavailable as exc:
        return Capability("agent", "missing", str(exc), INSTALL)
    may = "any process, node-wide too" if root else "your own processes (--pid, -- CMD)"
    return Capability("agent", "ok", f"agent at {socket_path}: you may probe {may}")
