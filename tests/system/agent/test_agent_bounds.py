"""What one user may hold in the agent, tried by real users (useradd): attach points
counted as they attach, modules and keyed probes per user, connections that never say
hello or stop asking, a connect flood and a crowd of users that leave room for others
and for root. Small bounds from a config file keep each attack short."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused, AgentUnavailable
from adaptyst_top.runtime.remote.settings import AgentSettings
from tests.support.bpf_objects import our_programs
from tests.support.marks import requires_root
from tests.system.agent.test_agent import (  # noqa: F401 - a fixture
    Agent,
    AsUser,
    User,
    answers,
    nothing_left,
    raw_client,
    say,
    shared,
    users,
    workload_as,
)

# serial: a flood delays no one: answer times
pytestmark = [pytest.mark.serial, pytest.mark.ebpf, requires_root]
BOUNDS = AgentSettings(
    max_clients=6,
    max_connections_per_user=3,
    max_attach_per_user=3,
    modules_per_user=4,
    keyed_probes_per_user=1,
    hello_timeout_s=1.0,
    # A client's connection waits while another of its connections opens a session,
    # which takes seconds on a busy node (PoCL's device list, a compile): at 2 s its
    # first session was closed under it and the bounds looked broken.
    idle_timeout_s=60.0,
)
QUICK_IDLE = dataclasses.replace(BOUNDS, idle_timeout_s=2.0)


@pytest.fixture
def bounded(request: pytest.FixtureRequest, shared: Path) -> Iterator[Agent]:  # noqa: F811
    settings = getattr(request, "param", BOUNDS)
    config = shared / "bounds.toml"
    default = AgentSettings()
    config.write_text(
        "".join(
            f"{k} = {v!r}\n"
            for k, v in dataclasses.asdict(settings).items()
            if v != getattr(default, k)
        )
    )
    a = Agent(shared / "bounded.sock", "--config", str(config))
    try:
        yield a
    finally:
        a.stop()
        assert nothing_left(5.0), our_programs()


def test_a_second_session_has_what_the_first_did_not_attach(
    bounded: Agent,
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users
    fn = f"uprobe:{shared / 'workload'}:"
    target = workload_as(alice, shared / "workload")

    def client(up: int, _down: int) -> None:
        first = AgentConnection(str(bounded.path))
        first.open(target.pid, [fn + "fast_fn", fn + "other_fn"], 0.02, False, 1000)
        second = AgentConnection(str(bounded.path))
        second.open(target.pid, [fn + "leaf_fn"], 0.02, False, 1000)  # the third point
        try:
            second.add(fn + "held_fn")
            fourth = "added"
        except AgentRefused as exc:
            fourth = str(exc)
        states = [p.state for p in first.snapshot(False).probes + second.snapshot(False).probes]
        say(up, fourth=fourth, states=states)

    with ended(target):
        c = AsUser(alice, client)
        got = c.read()
        assert got["states"] == ["attached"] * 3
        assert "3 attach points (max_attach_per_user)" in str(got["fourth"])
        assert c.wait() == 0


def test_a_profile_is_a_module_of_the_users(
    bounded: Agent,
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users
    fn = f"uprobe:{shared / 'workload'}:"
    target = workload_as(alice, shared / "workload")

    def client(up: int, _down: int) -> None:
        probes = AgentConnection(str(bounded.path))
        probes.open(
            target.pid, [fn + "fast_fn", fn + "other_fn", fn + "leaf_fn"], 0.02, False, 1000
        )
        profiled = AgentConnection(str(bounded.path))
        profiled.open(target.pid, [], 0.02, False, 1000, profile_hz=99)  # the fourth
        picked = AgentConnection(str(bounded.path))
        picked.open(None, [], 0.02, False, 1000)
        try:
            picked.profile(target.pid, 99)
            fifth = "profiled"
        except AgentRefused as exc:
            fifth = str(exc)
        profiled.profile(target.pid, 49)  # its own again, at another rate: no new module
        say(up, fifth=fifth, hz=profiled.snapshot(False).profile.hz)  # type: ignore[union-attr]

    with ended(target):
        c = AsUser(alice, client)
        got = c.read()
        assert "4 probe modules (modules_per_user)" in str(got["fifth"])
        assert got["hz"] == 49
        assert c.wait() == 0


def test_keyed_probes_and_modules_are_bounded_per_user_and_keyed_maps_sized_to_need(
    bounded: Agent,
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users
    target = workload_as(alice, shared / "workload")
    task = f"usdt:{shared / 'workload'}:adaptyst_test:task_begin"
    before = _locked_map_bytes(bounded.proc.pid)

    def client(up: int, _down: int) -> None:
        conn = AgentConnection(str(bounded.path))
        conn.open(target.pid, [task + "@arg1:str"], 0.02, False, 1000)
        say(up, opened=True)
        try:
            conn.add(f"usdt:{shared / 'workload'}:adaptyst_test:task_end@arg1:str")
            keyed = "added"
        except AgentRefused as exc:
            keyed = str(exc)
        say(up, keyed=keyed)

    with ended(target):
        c = AsUser(alice, client)
        assert c.read() == {"opened": True}
        # One keyed module: a preallocated one locked 19.5 MB (16,384 keys, 131,072
        # histogram entries); allocated as keys come, what a handful of keys take.
        locked = _locked_map_bytes(bounded.proc.pid) - before
        assert 0 < locked < 8 << 20, locked
        assert "1 keyed probes, @argN, @retval or a job's (keyed_probes_per_user)" in str(
            c.read()["keyed"]
        )
        assert c.wait() == 0


@contextlib.contextmanager
def ended(target: subprocess.Popen[str]) -> Iterator[None]:
    """TARGET killed and reaped however the block ends."""
    try:
        yield
    finally:
        target.kill()
        target.wait()


def _locked_map_bytes(pid: int) -> int:
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            text = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        if "map_type:" in text:
            total += sum(
                int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("memlock:")
            )
    return total


@pytest.mark.parametrize("bounded", [QUICK_IDLE], indirect=True, ids=["idle-2s"])
def test_silent_and_idle_connections_are_closed(bounded: Agent) -> None:
    silent = raw_client(bounded.path)
    start = time.monotonic()
    got = answers(silent)  # until the agent closes it
    assert time.monotonic() - start < BOUNDS.hello_timeout_s + 5
    assert [(g["type"], g["message"]) for g in got] == [("error", "no hello in 1 s")]
    idle = raw_client(bounded.path)
    idle.sendall(proto.encode("hello"))
    got = answers(idle)
    assert [g["type"] for g in got] == ["hello", "error"]
    assert got[1]["message"] == "no request in 2 s: closed"


def test_a_hello_sent_a_byte_at_a_time_ends_at_the_hello_deadline(bounded: Agent) -> None:
    """A byte every 0.3 s, never a newline: the socket's timeout (per recv) would wait
    for ever; the hello's deadline does not move."""
    slow = raw_client(bounded.path)
    start = time.monotonic()
    slow.settimeout(0.3)
    reply = b""
    while time.monotonic() - start < BOUNDS.hello_timeout_s + 5:
        with contextlib.suppress(OSError):
            slow.send(b"{")
        try:
            reply += slow.recv(4096)
        except TimeoutError:
            continue
        if reply.endswith(b"\n") or not reply:
            break
    took = time.monotonic() - start
    assert b"no hello in 1 s" in reply, reply
    assert took < BOUNDS.hello_timeout_s + 1.5, took


def test_a_crowd_of_users_leaves_root_room_and_a_flood_delays_no_one(
    bounded: Agent,
    users: tuple[User, User],  # noqa: F811
) -> None:
    alice, bob = users

    def hold(up: int, down: int) -> None:  # every connection the user may have, held
        conns = [AgentConnection(str(bounded.path)) for _ in range(BOUNDS.max_connections_per_user)]
        try:
            AgentConnection(str(bounded.path))
            more = "connected"
        except AgentUnavailable as exc:
            more = str(exc)
        say(up, more=more)
        os.read(down, 1)
        for c in conns:
            c.close()

    holders = [AsUser(u, hold) for u in users]
    try:
        said = [h.read()["more"] for h in holders]
        assert all(
            f"the most a user may have ({BOUNDS.max_connections_per_user})" in s for s in said
        )
        # max_clients reached by the two users: root has room of its own.
        root = AgentConnection(str(bounded.path))
        root.close()
    finally:
        for h in holders:
            h.tell()
            assert h.wait() == 0

    def flood(_up: int, down: int) -> None:
        os.set_blocking(down, False)
        while True:
            try:
                if os.read(down, 1):
                    return
            except BlockingIOError:
                pass
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with contextlib.suppress(OSError):
                s.connect(str(bounded.path))
            s.close()

    def connects(up: int, _down: int) -> None:
        failed = []
        for _ in range(30):
            try:
                AgentConnection(str(bounded.path)).close()
            except AgentUnavailable as exc:
                failed.append(str(exc))
        say(up, failed=failed)

    flooders = [AsUser(alice, flood) for _ in range(2)]
    try:
        time.sleep(0.5)
        other = AsUser(bob, connects)
        assert other.read() == {"failed": []}
        assert other.wait() == 0
    finally:
        for f in flooders:
            f.tell()
            assert f.wait() == 0
