"""doctor's `agent` lines: is a node agent there, what may this user do with it, and
what bounds its memory."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from adaptyst_top.runtime.remote.client import AgentConnection, AgentUnavailable
from adaptyst_top.runtime.remote.defaults import DEFAULT_SOCKET
from adaptyst_top.system.capability import Capability
from adaptyst_top.system.cgroup_memory import memory_bounds
from adaptyst_top.system.line_socket import peer_credentials

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


MIB = 1 << 20


def check_agent_memory(path: str | None) -> Capability | None:
    """The memory bounds of the agent at PATH (its cgroup's: MemoryMax= and MemoryHigh= of
    its unit) and its group's use now; None when no agent answers there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(path or str(DEFAULT_SOCKET))
        pid = peer_credentials(sock)[0]
    except OSError:
        return None
    finally:
        sock.close()
    if pid <= 0:  # an agent outside this PID namespace: the kernel names no process
        return Capability("agent-memory", "degraded", "the agent's process is not visible here")
    try:
        b = memory_bounds(pid)
    except (OSError, ValueError) as exc:
        return Capability("agent-memory", "degraded", f"its bounds cannot be read: {exc}")
    use = f"{b.current / MIB:.0f} MiB in use by the agent and its workers (cgroup {b.group})"
    if b.max is None:
        return Capability(
            "agent-memory",
            "degraded",
            f"no MemoryMax: nothing bounds the agent's memory; {use}",
            "MemoryMax= in its unit (systemd/adaptyst-top-agent.service sets 2G)",
        )
    high = "" if b.high is None else f", MemoryHigh {_size(b.high)}"
    return Capability("agent-memory", "ok", f"MemoryMax {_size(b.max)}{high}; {use}")


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / MIB:.0f} MiB"
