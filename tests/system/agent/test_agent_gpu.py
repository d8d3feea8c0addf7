"""Through the agent (root, which NVML shows every process), a user sees their own GPU
processes and the others only as a count and their memory together. Real users; NVML is
a stand-in with pynvml's names (no GPU here), given to an agent run in this process."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from adaptyst_top.agent.core.server import Agent as RealAgent
from adaptyst_top.runtime.remote.client import AgentConnection
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.marks import requires_root
from tests.system.agent.test_agent import AsUser, User, hear, say, shared, users, workload_as  # noqa: F401 - fixtures

pytestmark = [pytest.mark.ebpf, requires_root]


def test_a_user_sees_their_gpu_processes_and_others_only_in_total(
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alice, bob = users
    mine = workload_as(alice, shared / "workload")
    theirs = workload_as(bob, shared / "workload")
    fake = FakeNvml(
        [
            FakeGpu(
                procs=[(mine.pid, 1 << 30), (theirs.pid, 3 << 30)], proc_util=[(theirs.pid, 90, 5)]
            )
        ]
    )
    path = shared / "gpu-agent.sock"

    def client(up: int, down: int) -> None:
        hear(down)  # the agent is up
        conn = AgentConnection(str(path))
        conn.open(mine.pid, [], 0.02, False, 1000)
        (gpu,) = [d for d in conn.snapshot(with_hist=False).devices if d.kind == "gpu"]
        say(up, processes=gpu.extra["processes"], others=gpu.extra.get("processes_of_others"))
        conn.close()

    user = AsUser(alice, client)  # forked before the agent's threads start
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    agent = RealAgent(path)
    serving = threading.Thread(target=agent.serve_forever, daemon=True)
    serving.start()
    try:
        user.tell()
        got = user.read()
        assert [p["pid"] for p in got["processes"]] == [mine.pid]
        assert got["others"] == {"count": 1, "mem_bytes": 3 << 30}
        assert user.wait() == 0
    finally:
        agent.request_stop()
        serving.join(10)
        agent.stop()
        for p in (mine, theirs):
            p.kill()
            p.wait()
