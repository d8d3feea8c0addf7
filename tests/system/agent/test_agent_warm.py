"""A user's workers are ready as her connection says hello: the agent's spare opener and
parser take her ids before her first request, which finds them (a fresh user's first
probe waited for each interpreter to start, one after the other)."""

from __future__ import annotations

import os
from pathlib import Path

from adaptyst_top.runtime.remote.client import AgentConnection
from tests.support.marks import requires_root
from tests.support.waits import wait_until
from tests.system.agent.test_agent import (  # noqa: F401 - fixtures
    Agent,
    AsUser,
    User,
    agent,
    children_as,
    hear,
    say,
    shared,
    users,
    worker_name,
)

pytestmark = [requires_root]


def workers_of(agent_pid: int, uid: int) -> set[str]:
    """Which workers run as UID under the agent."""
    return {worker_name(pid) for pid in children_as(agent_pid, uid)} - {""}


def test_her_workers_start_at_her_hello_and_serve_her_first_request(
    agent: Agent,  # noqa: F811 - the fixture
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))  # the hello, no request yet
        say(up, connected=True)
        hear(down)
        listed, _ = conn.list_objects(
            {"pid": None, "binary": str(shared / "workload"), "pattern": "fast_fn",
             "functions": True, "usdt": False, "all": False}
        )  # fmt: skip
        say(up, functions=[f["name"] for f in listed[0].get("functions") or []])
        conn.close()

    # The agent's spares are up (a hello takes them; it never execs one).
    assert wait_until(lambda: workers_of(agent.proc.pid, 0) >= {"opener", "parser"}, 30.0)
    c = AsUser(alice, client)
    try:
        assert c.read() == {"connected": True}
        want = {"opener", "parser"}
        assert wait_until(lambda: workers_of(agent.proc.pid, alice.uid) >= want, 4.0)
        before = set(children_as(agent.proc.pid, alice.uid))
        os.write(c.down, b"go\n")
        assert c.read() == {"functions": ["fast_fn"]}
        assert before <= set(children_as(agent.proc.pid, alice.uid))  # the same ones served it
        assert c.wait() == 0
    except BaseException:
        c.kill()
        raise
