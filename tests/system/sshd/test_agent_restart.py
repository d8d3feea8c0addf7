"""A real agent restarted under a running `record` (#29 items 1 and 3): through this
node's socket and through SSH (`--host`, a real sshd), the recording goes on with no
traceback, says that it reconnected, and keeps one clock and growing counts."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.marks import requires_root
from tests.system.agent.test_agent import CLI, Agent, User, nothing_left, workload_as
from tests.system.sshd.test_agent_ssh import node  # noqa: F401 - the fixture

pytestmark = [pytest.mark.ebpf, requires_root]


def restarted_under_record(
    on: tuple[Path, User, dict[str, str]], *where: str
) -> tuple[list[dict[str, Any]], str, int]:
    """(the lines, stderr, status) of a record through WHERE whose agent is stopped after
    three lines and started again a second later."""
    d, user, env = on
    sock = d / "agent.sock"
    agent = Agent(sock)
    target = workload_as(user, d / "workload", "forever", "100")
    lines: list[dict[str, Any]] = []
    try:
        proc = subprocess.Popen(
            [*CLI, "record", *where, "--pid", str(target.pid), "--interval", "0.5",
             "--probe", f"uprobe:{d / 'workload'}:fast_fn", "--duration", "12"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        err: list[str] = []
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True).start()
        deadline = time.monotonic() + 60
        while len(lines) < 3:
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, "".join(err)
            lines.append(json.loads(line))
        agent.stop()
        time.sleep(1.0)  # the client finds no agent meanwhile, and says so
        agent = Agent(sock)
        lines += [json.loads(line) for line in proc.stdout]
        status = proc.wait(60)
        time.sleep(0.1)
        return lines, "".join(err), status
    finally:
        agent.stop()
        target.kill()
        target.wait()
        assert nothing_left(5.0)


def check_one_run(lines: list[dict[str, Any]], stderr: str, status: int) -> None:
    assert status == 0 and "Traceback" not in stderr, stderr
    times = [s["t"] for s in lines]
    assert times == sorted(times) and len(set(times)) == len(times), times
    counts = [s["probes"][0]["count"] for s in lines if s["probes"]]
    assert counts == sorted(counts), counts  # cumulative across the restart
    warnings = [w for s in lines for w in s.get("warnings", ())]
    assert any("lost the agent" in w and "retrying" in w for w in warnings), warnings
    back = [w for w in warnings if "it is back: probes re-added, counts go on" in w]
    assert len(back) == 1, warnings
    after = next(s for s in lines if back[0] in s.get("warnings", ()))
    assert after["probes"][0]["state"] == "attached"
    assert lines[-1]["final"] and lines[-1]["probes"][0]["count"] > counts[2]
    assert lines[-1]["t"] > 11.0  # one clock from the first open: 12 s of run


def test_a_restarted_agent_on_this_node(node: tuple[Path, User, dict[str, str]]) -> None:  # noqa: F811
    check_one_run(*restarted_under_record(node, "--agent", str(node[0] / "agent.sock")))


def test_a_restarted_agent_through_ssh(node: tuple[Path, User, dict[str, str]]) -> None:  # noqa: F811
    """Seen: `ValueError: write to closed file` out of the client, and `record` died."""
    check_one_run(*restarted_under_record(node, "--host", f"{node[1].name}@127.0.0.1"))
