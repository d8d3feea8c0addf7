"""Energy through the agent, as real users see it: alice's snapshots carry no device
power or energy (the counters are the PLATYPUS side channel), only her own probe's
joules, at the boundaries of the period (2 s here, a minute by default); bob, in one
of energy_groups, and root get the device figures. The CPU's figures are the agent's load-based estimate here (no RAPL in
this VM): the same fields as RAPL's."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from adaptyst_top.collectors.energy.user_view import NODE_ENERGY_NOTE
from adaptyst_top.runtime.remote.client import AgentConnection
from tests.support.marks import requires_root
from tests.system.agent import test_agent
from tests.system.agent.test_agent import Agent, AsUser, User, hear, run, say, workload_as

pytestmark = [pytest.mark.ebpf, requires_root]
shared, users = test_agent.shared, test_agent.users  # fixtures


def test_a_user_gets_their_own_joules_and_no_node_counter(
    users: tuple[User, User], shared: Path
) -> None:
    alice, bob = users
    config = shared / "energy.toml"
    config.write_text(
        f'cpu_power_model = "40:180"\nenergy_groups = ["{bob.name}"]\nuser_energy_period_s = 2.0\n'
    )
    agent = Agent(shared / "energy.sock", "--config", str(config))
    target = workload_as(alice, shared / "workload")
    bobs_own = workload_as(bob, shared / "workload")
    spec = f"uprobe:{shared / 'workload'}:held_fn"

    def alices(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, [spec], 0.02, False, 1000)
        say(up, ready=True)
        hear(down)
        seen = []
        for _ in range(60):
            s = conn.snapshot(with_hist=False)
            cpu = next(d for d in s.devices if d.kind == "cpu")
            seen.append([s.t, s.probes[0].energy_j, cpu.power_w, cpu.energy_j, cpu.note])
            time.sleep(0.1)
        say(up, seen=seen, split=len(conn.snapshot(with_hist=False).energy_split))

    def bobs(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(bobs_own.pid, [], 0.02, False, 1000)
        time.sleep(1.5)
        cpu = next(d for d in conn.snapshot(with_hist=False).devices if d.kind == "cpu")
        say(up, power=cpu.power_w, energy=cpu.energy_j, source=cpu.energy_source)

    try:
        a = AsUser(alice, alices)
        assert a.read() == {"ready": True}
        a.tell()
        run(target, "held 60 50000")  # 3 s on a CPU, while she looks
        said = a.read()
        assert a.wait() == 0
        b = AsUser(bob, bobs)
        bob_saw = b.read()
        assert b.wait() == 0
    finally:
        for p in (target, bobs_own):
            p.kill()
            p.wait()
        agent.stop()
    seen = said["seen"]
    assert isinstance(seen, list)
    assert all(p is None and e is None and n == NODE_ENERGY_NOTE for _, _, p, e, n in seen), seen
    assert said["split"] == 0
    joules = [j for _, j, *_ in seen]
    assert any(j for j in joules), json.dumps(seen)  # her own probe's joules are there
    changed = [seen[i][0] for i in range(1, len(seen)) if joules[i] != joules[i - 1]]
    # The raw joules move at each device reading (1 s); hers only at the period's (2 s)
    # boundaries, seen at her next snapshot (0.1 s apart, give or take the VM).
    assert all(b - a >= 1.5 for a, b in itertools.pairwise(changed)), seen
    assert bob_saw["source"] == "estimate" and bob_saw["energy"] is not None, bob_saw
