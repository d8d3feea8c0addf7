"""What one user may hold in the agent: connections, and what their sessions attach
together (attach points, modules, keyed probes). Root and the admin group are bounded
only by room of their own for connections, so a crowd of users never locks them out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from adaptyst_top.agent.core.authorization import Peer
from adaptyst_top.collectors.probes.engine.attach_account import AttachAccount
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.runtime.remote.settings import AgentSettings

if TYPE_CHECKING:
    from adaptyst_top.runtime.session import Session

# Profiles the agent runs for users at once, node-wide. Each is a sched_switch program
# run at every context switch of the node, every user's job's too; the kernel once
# bounded them at 64 (perf-event tracepoints), BTF tracepoints are not bounded.
MAX_PROFILES = 64


def crowded(peer: Peer, connected: Sequence[Peer], s: AgentSettings) -> str | None:
    """Why PEER may not connect beside CONNECTED (None: it may)."""
    alike = [p for p in connected if p.privileged == peer.privileged]
    mine = sum(1 for p in alike if p.uid == peer.uid)
    if not peer.privileged and mine >= s.max_connections_per_user:
        return (
            f"{peer.who} has {mine} connections to the agent, the most a user may "
            f"have ({s.max_connections_per_user})"
        )
    if len(alike) >= s.max_clients:
        return "the agent is full: try later"
    return None


def profiles_running(sessions: Sequence[Session | None]) -> int:
    """How many of SESSIONS sample a profile now."""
    return sum(1 for s in sessions if s is not None and s.profiler is not None)


def room_refusal(
    peer: Peer,
    account: AttachAccount,
    specs: Sequence[str],
    s: AgentSettings,
    profiles: int = 0,
    running: int = 0,
    by_process: bool = False,
) -> str | None:
    """Why SPECS (and PROFILES samplers, a module each) would take the user past what
    their sessions may hold together, or the node past MAX_PROFILES (RUNNING now).
    BY_PROCESS: the specs count each process apart, each as large as a keyed probe."""
    if not specs and not profiles:
        return None
    if profiles and running + profiles > MAX_PROFILES:
        return (
            f"the agent runs {running} profiles on this node, the most it runs at once "
            f"({MAX_PROFILES}): try later"
        )
    modules, keyed = account.groups()
    # Parsed already by spec_refusal.
    new_keyed = len(specs) if by_process else sum(1 for t in specs if parse_spec(t).keyed)
    if specs and account.room() < 1:
        bound = f"{account.limit} attach points (max_attach_per_user)"
    elif modules + len(specs) + profiles > s.modules_per_user:
        bound = f"{s.modules_per_user} probe modules (modules_per_user)"
    elif new_keyed and keyed + new_keyed > s.keyed_probes_per_user:
        bound = (
            f"{s.keyed_probes_per_user} keyed probes, @argN, @retval or a job's "
            "(keyed_probes_per_user)"
        )
    else:
        return None
    return (
        f"{peer.who}'s sessions hold the most a user may have on this node: {bound}; "
        "remove some first"
    )
