"""The agent's spare workers (agent/core/kept_workers.py), real, as root: a spare opener
and parser are exec'd ahead, root's until one is told whose it is, then hers alone, with
an address-space layout of their own; a spare that ended is replaced; none outlives the
agent, whichever way it ends."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.agent.core import kept_workers, opener, parser
from adaptyst_top.agent.core.kept_workers import KeptWorkers, end
from adaptyst_top.runtime.remote.client import AgentConnection
from tests.support.marks import requires_root
from tests.support.waits import wait_until
from tests.system.agent.test_agent import (  # noqa: F401 - fixtures
    Agent,
    AsUser,
    User,
    children_as,
    say,
    shared,
    users,
    worker_name,
)

pytestmark = [requires_root]
KINDS = (opener._KEPT, parser._KEPT)


@pytest.fixture
def spares() -> Iterator[None]:
    kept_workers.keep_spares()
    try:
        assert wait_until(lambda: all(_spare_pid(k) for k in KINDS), 10.0)
        yield
    finally:
        kept_workers.end_spares()
        for kind in KINDS:
            kind.end_all()


def _spare_pid(kind: KeptWorkers) -> int | None:
    spare = kind._spare
    return None if spare is None else spare.proc.pid


def _uids(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    return []


def _mapped_at(pid: int, name: str) -> int:
    """Where PID's first mapping of a file named NAME starts."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        if line.rsplit("/", 1)[-1].startswith(name):
            return int(line.split("-", 1)[0], 16)
    raise AssertionError(f"{name} not mapped in {pid}")


def test_a_spare_is_roots_until_told_then_hers_alone(
    spares: None,
    users: tuple[User, User],  # noqa: F811 - the fixture
) -> None:
    alice, bob = users
    first = _spare_pid(parser._KEPT)
    assert first is not None and _uids(first) == [0] * 4  # waiting, nobody's yet
    hers = parser._KEPT.start(alice.uid, alice.gid, [alice.gid])
    try:
        assert hers.proc.pid == first
        assert wait_until(lambda: _uids(first) == [alice.uid] * 4, 5.0)
        # The first the kernel kills if the agent's cgroup runs out of memory.
        assert Path(f"/proc/{first}/oom_score_adj").read_text().strip() == "1000"
        # The next spare, exec'd fresh: another process, laid out anew.
        assert wait_until(lambda: _spare_pid(parser._KEPT) not in (None, first), 10.0)
        his = parser._KEPT.start(bob.uid, bob.gid, [bob.gid])
        try:
            assert wait_until(lambda: _uids(his.proc.pid) == [bob.uid] * 4, 5.0)
            aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0"
            if aslr:
                assert _mapped_at(first, "libc") != _mapped_at(his.proc.pid, "libc")
        finally:
            end(his)
    finally:
        end(hers)


def test_a_spare_that_ended_is_replaced(spares: None) -> None:
    old = _spare_pid(opener._KEPT)
    assert old is not None
    os.kill(old, signal.SIGKILL)
    assert wait_until(
        lambda: opener._KEPT._spare is not None and opener._KEPT._spare.proc.poll() is not None, 5.0
    )
    kept_workers.reap_idle()  # the agent's guard, often
    assert wait_until(lambda: _spare_pid(opener._KEPT) not in (None, old), 10.0)


def test_no_spare_is_started_once_they_are_ended(spares: None) -> None:
    pids = [_spare_pid(k) for k in KINDS]
    kept_workers.end_spares()
    kept_workers.reap_idle()
    assert all(k._spare is None for k in KINDS)
    assert all(not Path(f"/proc/{p}").exists() for p in pids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_her_first_request_takes_the_spares_and_none_outlives_the_agent(
    sig: int,
    users: tuple[User, User],  # noqa: F811 - the fixture
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users
    agent = Agent(shared / f"agent-spare-{sig}.sock")
    try:

        def spares() -> dict[str, int]:
            return {worker_name(p): p for p in children_as(agent.proc.pid, 0)}

        assert wait_until(lambda: {"opener", "parser"} <= set(spares()), 30.0)
        before = spares()

        def hello(up: int, down: int) -> None:
            conn = AgentConnection(str(agent.path))
            conn.list_objects({"pid": None, "binary": str(shared / "workload"), "pattern": "fast_fn",
                               "functions": True, "usdt": False, "all": False})  # fmt: skip
            say(up, listed=True)
            os.read(down, 1)
            conn.close()

        c = AsUser(alice, hello)
        try:
            assert c.read() == {"listed": True}
            mine = {worker_name(p): p for p in children_as(agent.proc.pid, alice.uid)}
            assert mine["opener"] == before["opener"] and mine["parser"] == before["parser"]
            os.write(c.down, b"x")
            assert c.wait() == 0
        except BaseException:
            c.kill()
            raise
        assert wait_until(lambda: {"opener", "parser"} <= set(spares()), 10.0)
        left = set(spares().values())
        agent.stop(sig)
        assert wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in left), 15.0)
    finally:
        agent.stop()


def test_an_agent_told_to_keep_no_spares_keeps_none(
    users: tuple[User, User],  # noqa: F811 - the fixture
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users
    config = shared / "no-spares.toml"
    config.write_text("spare_workers = false\n")
    agent = Agent(shared / "no-spares.sock", "--config", str(config))
    try:
        # Its preload done (calibration, devices): still no worker of root's waiting.
        assert not wait_until(
            lambda: any(worker_name(p) for p in children_as(agent.proc.pid, 0)), 3.0
        )

        def hello(up: int, down: int) -> None:
            conn = AgentConnection(str(agent.path))
            conn.list_objects({"pid": None, "binary": str(shared / "workload"), "pattern": "fast_fn",
                               "functions": True, "usdt": False, "all": False})  # fmt: skip
            say(up, listed=True)
            conn.close()

        c = AsUser(alice, hello)
        assert c.read() == {"listed": True}
        assert c.wait() == 0
        assert not any(worker_name(p) for p in children_as(agent.proc.pid, 0))
    finally:
        agent.stop()
        config.unlink()


def test_a_hello_takes_a_spare_never_an_exec_and_one_a_user_per_while(
    spares: None,
    users: tuple[User, User],  # noqa: F811 - the fixture
) -> None:
    """A user who kills her workers and says hello again, in a loop, cost root an exec
    (~120 ms of CPU) at each hello (a review of this change)."""
    alice, _ = users
    first = _spare_pid(parser._KEPT)
    parser.warm(alice.uid, alice.gid, [alice.gid])
    (hers,) = parser._KEPT.kept.values()
    assert hers.proc.pid == first
    os.kill(first, signal.SIGKILL)  # hers to kill
    hers.proc.wait()
    kept_workers.reap_idle()
    assert wait_until(lambda: _spare_pid(parser._KEPT) not in (None, first), 10.0)
    again = _spare_pid(parser._KEPT)
    parser.warm(alice.uid, alice.gid, [alice.gid])  # within WARM_EVERY_S: nothing taken
    assert not parser._KEPT.kept and _spare_pid(parser._KEPT) == again
    kept_workers.end_spares()
    parser.warm(alice.uid + 1, alice.gid, [alice.gid])  # no spare: nothing exec'd
    assert not parser._KEPT.kept
