"""The agent runs at most MAX_PROFILES users' profiles at once, node-wide: each is a
program at every context switch of the node, and BTF tracepoints, unlike the
perf-event ones before, put no bound of their own on them."""

from __future__ import annotations

from types import SimpleNamespace

from adaptyst_top.agent.core.authorization import Peer
from adaptyst_top.agent.core.bounds import MAX_PROFILES, profiles_running, room_refusal
from adaptyst_top.collectors.probes.engine.attach_account import AttachAccount
from adaptyst_top.runtime.remote.settings import AgentSettings

ALICE = Peer(pid=10, uid=1001, gid=1001, groups=frozenset({1001}), privileged=False)


def test_a_profile_past_the_node_bound_is_refused_in_one_line() -> None:
    account, settings = AttachAccount(1000), AgentSettings()
    assert room_refusal(ALICE, account, [], settings, 1, MAX_PROFILES - 1) is None
    why = room_refusal(ALICE, account, [], settings, 1, MAX_PROFILES)
    assert why == (
        f"the agent runs {MAX_PROFILES} profiles on this node, the most it runs at once "
        f"({MAX_PROFILES}): try later"
    )
    assert room_refusal(ALICE, account, [], settings, 0, MAX_PROFILES) is None  # no profile


def test_running_profiles_are_the_sessions_that_sample() -> None:
    sessions = [SimpleNamespace(profiler=object()), SimpleNamespace(profiler=None), None]
    assert profiles_running(sessions) == 1  # type: ignore[arg-type]
