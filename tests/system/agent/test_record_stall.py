"""`record` writes one line per interval at its own time: an agent stopped (SIGSTOP) for
a while costs the lines of that while as one stated gap, never a burst of lines stamped
a millisecond apart when it answers again."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from pathlib import Path

from tests.system.agent.test_agent import CLI, Agent, shared  # noqa: F401 - shared is the agent's folder

INTERVAL = 0.2
STALL_S = 3.0


def test_a_stalled_agent_is_a_stated_gap_not_a_burst(shared: Path) -> None:  # noqa: F811
    agent = Agent(shared / "stall.sock")
    target = subprocess.Popen([str(shared / "workload"), "forever", "100"])
    try:
        rec = subprocess.Popen(
            [*CLI, "record", "--agent", str(agent.path), "--pid", str(target.pid),
             "--probe", f"uprobe:{shared / 'workload'}:fast_fn",
             "--interval", str(INTERVAL), "--duration", "8"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert rec.stdout is not None
        first = rec.stdout.readline()  # attached and counting
        assert first, rec.stderr.read() if rec.stderr else ""
        time.sleep(1.0)
        agent.proc.send_signal(signal.SIGSTOP)
        time.sleep(STALL_S)
        agent.proc.send_signal(signal.SIGCONT)
        out, err = rec.communicate(timeout=60)
    finally:
        agent.proc.send_signal(signal.SIGCONT)
        target.kill()
        target.wait()
        agent.stop()
    assert rec.returncode == 0, err
    lines = [json.loads(x) for x in [first, *out.splitlines()]]
    times = [line["t"] for line in lines]
    steps = [b - a for a, b in itertools.pairwise(times)]
    # Each line at its own time: a burst was 1 ms apart (10 ms leaves a busy machine room
    # for a late tick, which the next one then follows closely).
    assert min(steps) >= 0.01, steps
    said = [w for line in lines for w in line.get("warnings", []) if w.startswith("no snapshot")]
    # The stall is one gap; a busy machine may add short ones of its own.
    gaps = [w for w in said if float(w.split()[3]) >= STALL_S - 2 * INTERVAL]
    assert len(gaps) == 1, said
    missed = int(gaps[0].split(": ")[1].split()[0])
    # The stall took about STALL_S / INTERVAL ticks (the scheduler may shift one or two).
    assert STALL_S / INTERVAL - 3 <= missed <= STALL_S / INTERVAL + 2, gaps
    assert max(steps) >= STALL_S - 2 * INTERVAL, steps
