"""Every wait for the agent is bounded and interruptible (#29 item 2): an agent of the
test's own on a Unix socket says hello, then answers as the test says and stalls where
it says. `record` must end on time at --duration, and at SIGINT/SIGTERM, whatever it
was waiting for; a monitor's quit must end a snapshot under way."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote import client as agent_client
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.remote.client import SSH_ENV, AgentConnection, AgentInterrupted
from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.snapshot import ProbeRef, Snapshot
from tests.system.agent.test_agent import CLI

Answer = Callable[[dict[str, object]], bytes | None]  # None: stall from here on


class StallingAgent:
    """Says hello; answers open and the first SNAPSHOTS snapshots; then reads on and
    answers nothing (STALL_AT="open": not even the open)."""

    def __init__(
        self, folder: Path, stall_at: str, snapshots: int = 1, late: dict[str, float] | None = None
    ) -> None:
        self.path = folder / "agent.sock"
        self.stall_at, self.snapshots = stall_at, snapshots
        self.late = late or {}  # kind -> seconds its answer comes late
        self.asked: list[str] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        reader = proto.LineReader(conn, proto.MAX_LINE)
        stalled = False
        try:
            while (msg := reader.read()) is not None:
                kind = str(msg["type"])
                self.asked.append(kind)
                stalled = stalled or kind == self.stall_at
                if kind == "snapshot":
                    stalled = stalled or self.asked.count("snapshot") > self.snapshots
                if stalled:
                    continue  # read, never answered
                time.sleep(self.late.get(kind, 0.0))
                if kind == "hello":
                    conn.sendall(proto.encode("hello", uid=os.getuid()))
                elif kind == "snapshot":
                    snap = Snapshot(t=float(self.asked.count("snapshot")), host="fake")
                    conn.sendall(proto.encode("snapshot", snapshot=snap.to_json()))
                elif kind == "toggle":
                    conn.sendall(proto.encode("ok", on=True))
                elif kind == "remove":
                    conn.sendall(proto.encode("ok", spec="uprobe:/bin/true:main"))
                else:
                    conn.sendall(proto.encode("ok"))
        except (OSError, proto.ProtocolError):
            pass

    def close(self) -> None:
        self.server.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="adt-waits-") as d:
        yield Path(d)


def record(agent: StallingAgent, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "record", "--agent", str(agent.path), "--pid", str(os.getpid()),
         "--probe", "uprobe:/bin/true:main", "--interval", "0.5", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def ended_within(proc: subprocess.Popen[str], seconds: float) -> tuple[int, str, str]:
    """(status, stdout, stderr); the test fails (and the process is killed) if it takes
    longer: before the fix, each of these waited 300 s."""
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still waiting for the agent after {seconds} s")
    return proc.returncode, out, err


def wait_for(agent: StallingAgent, kind: str, count: int = 1) -> None:
    deadline = time.monotonic() + 30
    while agent.asked.count(kind) < count:
        assert time.monotonic() < deadline, agent.asked
        time.sleep(0.02)


def test_duration_ends_the_run_on_time_when_snapshots_stall(folder: Path) -> None:
    agent = StallingAgent(folder, stall_at="", snapshots=1)
    try:
        proc = record(agent, "--duration", "2")
        wait_for(agent, "open")
        opened = time.monotonic()
        status, out, err = ended_within(proc, 20)
        took = time.monotonic() - opened
    finally:
        agent.close()
    assert status == 0, err
    assert took < 2 + 1 + 2, took  # the duration, the last answer's grace, a margin
    last = json.loads(out.splitlines()[-1])
    assert last["final"] is True
    assert any("time is up while waiting for the agent" in w for w in last["warnings"]), last


def test_duration_ends_the_run_when_the_open_stalls(folder: Path) -> None:
    agent = StallingAgent(folder, stall_at="open")
    try:
        status, out, err = ended_within(record(agent, "--duration", "2"), 20)
    finally:
        agent.close()
    assert status == 1 and out == ""
    assert err.strip() == (
        f"adaptyst-top: the run's time is up while waiting for the agent at {agent.path}"
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_wait_for_the_open(folder: Path, sig: signal.Signals) -> None:
    agent = StallingAgent(folder, stall_at="open")
    try:
        proc = record(agent)
        wait_for(agent, "open")
        proc.send_signal(sig)
        status, out, err = ended_within(proc, 5)
    finally:
        agent.close()
    assert status == 1 and out == ""
    assert err.strip() == f"adaptyst-top: stopped while waiting for the agent at {agent.path}"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_wait_for_a_snapshot(folder: Path, sig: signal.Signals) -> None:
    agent = StallingAgent(folder, stall_at="", snapshots=2)
    try:
        proc = record(agent)
        wait_for(agent, "snapshot", 3)  # two answered, the third stalls
        time.sleep(0.2)
        proc.send_signal(sig)
        status, out, err = ended_within(proc, 5)
    finally:
        agent.close()
    assert status == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [s["t"] for s in lines[:2]] == [1.0, 2.0] and lines[-1]["final"] is True
    assert lines[-1]["t"] > 2.0  # the run's clock, not a restart at 0
    assert any("stopped while waiting for the agent" in w for w in lines[-1]["warnings"])


def test_a_stop_ends_a_snapshot_under_way_in_another_thread(folder: Path) -> None:
    """The monitor's quit: its snapshot thread waits on the agent; the quit sets the stop."""
    agent = StallingAgent(folder, stall_at="", snapshots=0)
    stop = StopFlag()
    conn = AgentConnection(str(agent.path), stop=stop)
    got: list[Snapshot] = []
    try:
        conn.open(os.getpid(), [], 0.02, False, 10)
        taker = threading.Thread(target=lambda: got.append(conn.snapshot(False)))
        taker.start()
        wait_for(agent, "snapshot")
        stopped = time.monotonic()
        stop.set()
        taker.join(5)
        assert not taker.is_alive() and time.monotonic() - stopped < 1.0
    finally:
        conn.close()
        agent.close()
    assert got[0].warnings == (f"stopped while waiting for the agent at {agent.path}",)


def test_an_answer_that_comes_too_late_is_never_taken_for_the_next_one(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen: a toggle timed out, its answer came late, and the next remove took it for
    its own (and returned no spec: the removed probe would have come back)."""
    monkeypatch.setattr(agent_client, "SNAPSHOT_TIMEOUT_S", 0.3)
    agent = StallingAgent(folder, stall_at="", snapshots=5, late={"toggle": 0.6})
    conn = AgentConnection(str(agent.path))
    try:
        conn.open(os.getpid(), ["uprobe:/bin/true:main"], 0.02, False, 10)
        with pytest.raises(TimeoutError, match=r"no answer to toggle in 0\.3 s"):
            conn.toggle(ProbeRef(0, 0, None))
        time.sleep(0.5)  # the late answer is there now
        with pytest.raises(OSError):  # the link went with the unanswered request
            conn.remove(ProbeRef(0, 0, None))
        back = conn.snapshot(False)  # the next snapshot finds the agent again
        assert any("it is back" in w for w in back.warnings), back.warnings
        assert conn.remove(ProbeRef(0, 0, None)) == "uprobe:/bin/true:main"
    finally:
        conn.close()
        agent.close()


def test_a_large_request_to_an_ssh_that_stops_reading_ends_at_the_stop(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An "ssh" that says the agent's hello and then reads nothing: an open of 5,000
    specs (160 KB, more than a pipe holds) blocked its write for ever."""
    fake = folder / "ssh"
    fake.write_text('#!/bin/sh\nprintf \'{"v":1,"type":"hello","uid":0}\\n\'\nexec sleep 60\n')
    fake.chmod(0o755)
    monkeypatch.setenv(SSH_ENV, str(fake))
    stop = StopFlag()
    conn = AgentConnection("unused", host="node", stop=stop)
    specs = [
        f"uprobe:/usr/lib/some/library/of/a/long/name.so:function_{i:05d}" for i in range(5000)
    ]
    threading.Timer(1.0, stop.set).start()
    began = time.monotonic()
    try:
        with pytest.raises(AgentInterrupted, match="stopped while waiting for the agent"):
            conn.open(1, specs, 0.02, False, 10000)
        assert time.monotonic() - began < 2.5
    finally:
        conn.close()
