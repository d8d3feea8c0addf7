"""A relay of a job's view (`bridge --job ID --nodes A,B`): the agent's protocol on its
standard input and output, its group's snapshot merged, its nodes let go on every way out."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import pytest

from adaptyst_top.runtime.job_fanout import JobRefused
from adaptyst_top.runtime.job_relay import Relay, RelayError, relay_args, serve
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.remote.transport import AgentRefused
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.snapshot import NodeState, ProbeRef, ProbeTarget, Snapshot


class FakeFanout:
    """JobFanout's face: what the relay asked of it, and a merged snapshot."""

    def __init__(self, job: str, nodes: Sequence[str], opts: SessionOptions) -> None:
        if "refuse" in nodes:
            raise JobRefused("job 7 belongs to user alice; you may target your own jobs")
        self.job, self.nodes, self.opts = job, list(nodes), opts
        self.refused = ["n2: a probe the kernel refused"]
        self.asked: list[Any] = []
        self.closed = False

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        self.asked.append(("snapshot", with_hist))
        states = tuple(NodeState(n, "ok", None, 0.1) for n in self.nodes)
        return Snapshot(t=1.0, host="n1", target=ProbeTarget("job 7", (5,)), nodes=states)

    def add(self, spec: str) -> None:
        if spec == "bad":
            raise AgentRefused("n1: no such function")
        if spec == "odd":
            raise KeyError("what nothing foresaw")
        self.asked.append(("add", spec))

    def toggle(self, ref: ProbeRef) -> bool:
        self.asked.append(("toggle", ref))
        return True

    def remove(self, ref: ProbeRef) -> str:
        self.asked.append(("remove", ref))
        return "mpi:"

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def relay() -> Iterator[tuple[Relay, list[FakeFanout]]]:
    made: list[FakeFanout] = []

    def make(job: str, nodes: Sequence[str], opts: SessionOptions) -> Any:
        made.append(FakeFanout(job, nodes, opts))
        return made[-1]

    yield Relay("7", ["n1", "n2"], make), made


def talk(relay: Relay, *requests: dict[str, Any], hello: bool = True) -> tuple[int, list[Any]]:
    """RELAY served over pipes: REQUESTS sent, then the end; (its status, its answers)."""
    ins, outs = os.pipe(), os.pipe()
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(serve(relay, ins[0], outs[1])))
    t.start()
    lines = [proto.encode("hello")] if hello else []
    lines += [orjson.dumps(r) + b"\n" for r in requests]
    os.write(ins[1], b"".join(lines))
    os.close(ins[1])
    t.join(10)
    os.close(outs[1])
    with os.fdopen(outs[0], "rb") as f:
        answers = [orjson.loads(line) for line in f]
    os.close(ins[0])
    return done[0], answers


def test_a_relay_opens_its_group_and_answers_as_an_agent(
    relay: tuple[Relay, list[FakeFanout]],
) -> None:
    r, made = relay
    status, answers = talk(
        r,
        {"type": "open", "job": "7", "probes": ["mpi:"], "budget": 0.05, "profile_hz": 49},
        {"type": "snapshot", "with_hist": False},
        {"type": "add", "spec": "uprobe:/x/app:solve"},
        {"type": "add", "spec": "bad"},
        {"type": "add", "spec": "odd"},
        {"type": "toggle", "ref": [0, 1, None]},
        {"type": "remove", "ref": [0, None, None]},
        {"type": "candidates"},
        {"type": "profile", "pid": 5, "hz": 99},
    )
    assert status == 0
    assert answers[0]["type"] == "hello" and answers[0]["uid"] == os.getuid()
    assert answers[1] == {"v": 1, "type": "ok", "refused": ["n2: a probe the kernel refused"]}
    snap = Snapshot.from_json(answers[2]["snapshot"])
    assert [n.name for n in snap.nodes] == ["n1", "n2"]
    assert answers[3]["type"] == "ok"
    assert answers[4] == {"v": 1, "type": "error", "message": "n1: no such function"}
    # What nothing foresaw is one line, and the relay goes on.
    assert answers[5]["message"] == "relay: KeyError: 'what nothing foresaw'"
    assert answers[6]["on"] is True and answers[7]["spec"] == "mpi:"
    assert answers[8]["candidates"] == []
    assert answers[9]["type"] == "error" and "--host" in answers[9]["message"]
    (fanout,) = made
    assert fanout.nodes == ["n1", "n2"] and fanout.job == "7"
    assert list(fanout.opts.probing.specs) == ["mpi:"] and fanout.opts.probing.profile_hz == 49
    assert fanout.opts.probing.budget == 0.05 and fanout.opts.probing.by_process
    # Its group is reached directly, however large the login node's fan-out was.
    assert fanout.opts.target.job_fanout >= len(fanout.nodes)
    assert fanout.asked[:2] == [("snapshot", False), ("add", "uprobe:/x/app:solve")]
    assert fanout.closed  # the login node went: its nodes are let go


def test_a_relay_watches_its_job_alone_and_one_session(
    relay: tuple[Relay, list[FakeFanout]],
) -> None:
    r, made = relay
    _, answers = talk(
        r,
        {"type": "snapshot"},
        {"type": "open", "job": "8", "probes": []},
        {"type": "open", "pid": 1, "job": "7", "probes": []},
        {"type": "open", "job": "7", "probes": []},
        {"type": "open", "job": "7", "probes": []},
    )
    errors = [a.get("message") for a in answers[1:]]
    assert errors[0] == "open a session first"
    assert "job 7's processes alone" in errors[1] and "job 7's processes alone" in errors[2]
    assert answers[4]["type"] == "ok" and "already" in errors[4]
    assert len(made) == 1


def test_every_node_refusing_is_the_relays_one_line() -> None:
    r = Relay("7", ["refuse"], lambda j, n, o: FakeFanout(j, n, o))  # type: ignore[arg-type,return-value]
    _, answers = talk(r, {"type": "open", "job": "7", "probes": []})
    assert answers[1]["message"] == "job 7 belongs to user alice; you may target your own jobs"


@pytest.mark.parametrize(
    "line",
    [b"not json\n", b'{"type": "open", "job": "7", "probes": "mpi:"}\n', b'{"type": "shell"}\n'],
)
def test_what_breaks_the_protocol_is_one_error_and_the_end(
    line: bytes, relay: tuple[Relay, list[FakeFanout]]
) -> None:
    r, made = relay
    ins, outs = os.pipe(), os.pipe()
    os.write(ins[1], proto.encode("hello") + line + proto.encode("snapshot"))
    os.close(ins[1])
    assert serve(r, ins[0], outs[1]) == 2
    os.close(outs[1])
    with os.fdopen(outs[0], "rb") as f:
        answers = [orjson.loads(x) for x in f]
    assert [a["type"] for a in answers] == ["hello", "error"]
    os.close(ins[0])
    assert not made


def test_a_client_of_another_version_is_told_so(relay: tuple[Relay, list[FakeFanout]]) -> None:
    status, answers = talk(relay[0], {"v": 2, "type": "hello"}, hello=False)
    assert status == 2 and "version" in answers[0]["message"]


@pytest.mark.parametrize(
    "job,nodes",
    [
        ("7", "-oProxyCommand=x"),
        ("7", "a,a"),
        ("x", "a"),
        ("7", ""),
        ("7", ",".join(f"n{i}" for i in range(300))),
    ],
)
def test_a_relays_command_line_is_checked(job: str, nodes: str) -> None:
    with pytest.raises(RelayError):
        relay_args(job, nodes)
    assert relay_args("7", "n1,n2") == ("7", ["n1", "n2"])
