"""PID 1 (init, root's) asked of the agent by a user, in each request that names a
process: refused in one line, as any of root's processes is; the connection answers and
stays usable."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused
from tests.support.marks import requires_root
from tests.system.agent.test_agent import (  # noqa: F401 - fixtures
    Agent,
    AsUser,
    User,
    agent,
    say,
    shared,
    users,
)

pytestmark = [pytest.mark.ebpf, requires_root]
RULE = "PID 1 belongs to root; you may probe your own processes"


def test_pid_1_is_refused_in_one_line_by_every_request(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users

    def client(up: int, _down: int) -> None:
        out: dict[str, object] = {}
        conn = AgentConnection(str(agent.path))
        try:
            conn.open(1, [], 0.02, False, 1000, profile_hz=99)
        except AgentRefused as exc:
            out["open"] = str(exc)
        conn.close()
        conn = AgentConnection(str(agent.path))
        try:
            conn.open(None, [], 0.02, False, 1000)  # untargeted: the process list's
            try:
                conn.profile(1, 99)
            except AgentRefused as exc:
                out["profile"] = str(exc)
            full = {"binary": None, "functions": True, "usdt": True, "all": False}
            try:
                conn.list_objects({**full, "pid": 1, "pattern": "*"})
            except AgentRefused as exc:
                out["list"] = str(exc)
            out["still_answers"] = conn.snapshot(with_hist=False) is not None
        finally:
            conn.close()
        say(up, **out)

    c = AsUser(alice, client)
    assert c.read() == {"open": RULE, "profile": RULE, "list": RULE, "still_answers": True}
    assert c.wait() == 0
