"""A job's view over its nodes (JobFanout), each node's agent faked as AgentConnection
speaks to it: refusals, lost links, relays, ranks asked before a snapshot shows."""

from __future__ import annotations

from typing import ClassVar

import pytest


class FakeConnection:
    """A node's agent as AgentConnection speaks to it: opens, snapshots, refusals."""

    refuse: ClassVar[dict[str, str]] = {}
    broken: ClassVar[set[str]] = set()

    relayed: ClassVar[dict[str, object]] = {}  # a relay's answer, by its head

    def __init__(
        self, path: str, host: str, stop: object, give_up_at: object, bridge_args: object = ()
    ) -> None:
        self.host, self.lost, self.refused, self.closed = host, None, [], False
        self.bridge_args = bridge_args

    def open(self, *args: object) -> None:
        if self.host in self.refuse:
            from adaptyst_top.runtime.remote.client import AgentRefused

            raise AgentRefused(self.refuse[self.host])

    def snapshot(self, with_hist: bool) -> object:
        if self.host in self.broken:
            raise KeyError("a field nobody foresaw")
        if self.bridge_args:
            return self.relayed[self.host]
        from adaptyst_top.snapshot import ProbeTarget, Snapshot

        return Snapshot(t=1.0, host=self.host, target=ProbeTarget("job 7", (1,)))

    def add(self, spec: str) -> None: ...

    def close(self) -> None:
        self.closed = True


def _opts(fanout: int | None = None) -> object:
    from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target

    target = Target(job="7") if fanout is None else Target(job="7", job_fanout=fanout)
    return SessionOptions(target, ProbeSettings(specs=["mpi:"]))


def test_a_job_every_node_refuses_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from adaptyst_top.runtime import job_fanout

    monkeypatch.setattr(job_fanout, "AgentConnection", FakeConnection)
    why = "job 7 belongs to user alice; you may target your own jobs"
    monkeypatch.setattr(FakeConnection, "refuse", {"n1": why, "n2": why})
    before = threading.active_count()
    with pytest.raises(job_fanout.JobRefused) as refused:
        job_fanout.JobFanout("7", ["n1", "n2"], _opts())  # type: ignore[arg-type]
    assert str(refused.value) == why
    assert threading.active_count() == before


def test_a_node_that_breaks_is_lost_and_the_others_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from adaptyst_top.runtime import job_fanout

    monkeypatch.setattr(job_fanout, "AgentConnection", FakeConnection)
    monkeypatch.setattr(FakeConnection, "broken", {"n2"})
    view = job_fanout.JobFanout("7", ["n1", "n2", "n3"], _opts(), fresh_wait=30)  # type: ignore[arg-type]
    try:
        snap = view.snapshot()
        states = {n.name: (n.state, n.reason) for n in snap.nodes}
        assert states["n1"] == ("ok", None) and states["n3"] == ("ok", None)
        assert states["n2"][0] == "lost" and "KeyError" in str(states["n2"][1])
        assert snap.target is not None and snap.target.name == "job 7 on 3 nodes"
    finally:
        view.close()
    assert all(not t.is_alive() for t in view._threads)
    assert all(link.conn is None or link.conn.closed for link in view.links)  # type: ignore[attr-defined]


def test_a_job_on_too_many_nodes_for_one_view_says_so() -> None:
    from adaptyst_top.runtime import job_fanout

    with pytest.raises(job_fanout.JobRefused, match="cluster view"):
        job_fanout.JobFanout("7", [f"n{i}" for i in range(5)], _opts(fanout=2))  # type: ignore[arg-type]


def test_past_its_fanout_a_job_is_reached_through_relays_on_its_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adaptyst_top.runtime import job_fanout
    from adaptyst_top.snapshot import NodeState, ProbeTarget, Snapshot

    monkeypatch.setattr(job_fanout, "AgentConnection", FakeConnection)
    told = (NodeState("n1", "ok", None, 0.25), NodeState("n2", "unreachable", "ssh: no route"))
    relay = Snapshot(t=1.0, host="n1", target=ProbeTarget("job 7", (1, 2)), nodes=told)
    monkeypatch.setattr(FakeConnection, "relayed", {"n1": relay})
    monkeypatch.setattr(FakeConnection, "broken", {"n3"})  # the second relay breaks
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    # Waited for as long as they take (a loaded machine's threads answer late).
    view = job_fanout.JobFanout("7", nodes, _opts(fanout=3), fresh_wait=30)  # type: ignore[arg-type]
    try:
        args = [link.conn.bridge_args for link in view.links]  # type: ignore[union-attr]
        assert args == [("--job", "7", "--nodes", "n1,n2,n3"), ("--job", "7", "--nodes", "n4,n5")]
        assert [link.name for link in view.links] == ["n1", "n4"]
        snap = view.snapshot()
        got = {n.name: (n.state, n.reason) for n in snap.nodes}
        assert got["n1"] == ("ok", None) and got["n2"] == ("unreachable", "ssh: no route")
        # What the relay did not name is not yet known; a broken relay's nodes say through whom.
        assert got["n3"] == ("connecting", None)
        assert got["n4"][0] == got["n5"][0] == "lost"
        assert str(got["n5"][1]).startswith("through n4: KeyError")
        assert snap.target is not None and snap.target.name == "job 7 on 5 nodes"
        n1 = next(n for n in snap.nodes if n.name == "n1")
        assert n1.age_s is not None and n1.age_s >= 0.25  # the relay's age, and the link's
    finally:
        view.close()


def test_a_relays_node_too_old_is_lost_as_one_direct_would_be() -> None:
    from adaptyst_top.runtime.job_fanout import LATE_S, NodeLink, relayed_states
    from adaptyst_top.snapshot import NodeState, Snapshot

    told = (
        NodeState("n1", "ok", None, LATE_S - 0.5),
        NodeState("n2", "ok", None, -50.0),  # a relay's clock is no reason to go back
        NodeState("elsewhere", "ok", None, 0.1),  # not of its group: not shown
    )
    link = NodeLink("n1", ("n1", "n2"), last=Snapshot(t=1.0, host="n1", nodes=told))
    got = relayed_states(link, "ok", None, 1.0)
    assert [(n.name, n.state) for n in got] == [("n1", "lost"), ("n2", "ok")]
    assert got[0].reason == f"no answer for {LATE_S + 0.5:.0f} s" and got[1].age_s == 1.0


class BrokenAdds(FakeConnection):
    """n2's link breaks on an add; n3's agent refuses it."""

    def add(self, spec: str) -> None:
        from adaptyst_top.runtime.remote.client import AgentRefused

        if self.host == "n2":
            raise ConnectionResetError("the agent closed the connection")
        if self.host == "n3":
            raise AgentRefused("no such function")


def test_an_add_that_breaks_one_nodes_link_loses_that_node_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adaptyst_top.runtime import job_fanout

    monkeypatch.setattr(job_fanout, "AgentConnection", BrokenAdds)
    view = job_fanout.JobFanout("7", ["n1", "n2", "n3"], _opts(), fresh_wait=30)  # type: ignore[arg-type]
    try:
        view.add("uprobe:/x/app:solve")
        states = {link.name: (link.state, link.reason) for link in view.links}
        assert states["n1"] == ("ok", None) and states["n3"] == ("ok", None)
        assert states["n2"][0] == "lost" and "ConnectionResetError" in str(states["n2"][1])
        assert view._added == ["uprobe:/x/app:solve"]  # n2 takes it when it is back
    finally:
        view.close()


def test_an_add_no_node_answered_is_kept_for_when_they_come_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adaptyst_top.runtime import job_fanout

    monkeypatch.setattr(job_fanout, "AgentConnection", FakeConnection)
    view = job_fanout.JobFanout("7", ["n1"], _opts(), fresh_wait=30)  # type: ignore[arg-type]
    try:
        view.links[0].conn = None  # its link gone, not yet back
        view.add("mpi:")
        assert view._added == ["mpi:"]
    finally:
        view.close()


def test_a_toggle_leaves_the_nodes_latest_stacks_to_the_next_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from adaptyst_top.runtime import job_fanout
    from adaptyst_top.snapshot import ProbeRef, ProfilePart, ProfileStack, Snapshot

    monkeypatch.setattr(job_fanout, "AgentConnection", FakeConnection)
    view = job_fanout.JobFanout("7", ["n1"], _opts(), fresh_wait=30)  # type: ignore[arg-type]
    try:
        stack = ProfileStack(pid=1, tid=1, frames=("main",), samples=3)
        last = Snapshot(t=1.0, host="n1", profile=ProfilePart(hz=99, samples=3, stacks=(stack,)))
        link = view.links[0]
        link.last, link.last_at = last, time.monotonic()  # an interval no view showed yet
        view.toggle(ProbeRef(0, None, None))
        assert link.merged is None  # looked at, not shown: its stacks are still to come
    finally:
        view.close()


class Profiled(FakeConnection):
    """A node whose processes 5 and 6 sleep: an off-CPU stack each in every snapshot."""

    def snapshot(self, with_hist: bool) -> object:
        from adaptyst_top.snapshot import ProbeTarget, ProfilePart, ProfileStack, Snapshot

        stacks = tuple(ProfileStack(pid=p, tid=p, frames=("main",), off_ns=1000) for p in (5, 6))
        part = ProfilePart(hz=99, samples=0, stacks=stacks)
        return Snapshot(t=1.0, host=self.host, target=ProbeTarget("job 7", (5, 6)), profile=part)


def test_no_stack_shows_before_its_processs_rank_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from adaptyst_top.runtime import job_fanout

    def slow_ranks(
        node: str, pids: object, stop: object = None, timeout: float = 0
    ) -> dict[int, int | None]:
        time.sleep(0.5)  # ssh's handshake on a busy node, past the view's wait
        return {5: 0, 6: 1}

    monkeypatch.setattr(job_fanout, "AgentConnection", Profiled)
    monkeypatch.setattr(job_fanout, "ask_ranks", slow_ranks)
    view = job_fanout.JobFanout("7", ["n1"], _opts(), fresh_wait=0.1)  # type: ignore[arg-type]
    try:
        heads = []
        deadline = time.monotonic() + 10
        while not heads and time.monotonic() < deadline:
            snap = view.snapshot()
            heads = [s.frames[:2] for s in snap.profile.stacks] if snap.profile else []
            if not heads:
                assert snap.nodes[0].state == "connecting", snap.nodes  # on its way
        assert sorted(heads) == [("n1", "rank 0"), ("n1", "rank 1")]
    finally:
        view.close()


def test_ranks_a_node_never_answers_are_given_up_after_a_few_tries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adaptyst_top.runtime import job_fanout

    asked: list[object] = []

    def no_answer(node: str, pids: object, stop: object = None, timeout: float = 0) -> None:
        asked.append(pids)

    monkeypatch.setattr(job_fanout, "AgentConnection", Profiled)
    monkeypatch.setattr(job_fanout, "ask_ranks", no_answer)
    view = job_fanout.JobFanout("7", ["n1"], _opts(), fresh_wait=30)  # type: ignore[arg-type]
    try:
        for _ in range(job_fanout.RANKS_TRIES + 2):
            snap = view.snapshot()  # shown meanwhile, its processes by pid
            assert snap.profile is not None
            assert sorted(s.frames[1] for s in snap.profile.stacks) == ["pid 5", "pid 6"]
        assert len(asked) == job_fanout.RANKS_TRIES  # not asked again once given up
    finally:
        view.close()
