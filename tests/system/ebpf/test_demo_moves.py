"""`make demo` as a newcomer sees it, on a machine with no GPU (as root, real probes):
within its first phase a task moves to PoCL's OpenCL device, really runs there, and
runs faster, measured, with the gain in the advisor pane's move log. The move is the
demo's logistic map, which PoCL spreads over every core in SIMD (1.9x at 10^6
elements here, numpy on one core making a pass over memory per operation)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptyst_top.placement import demo
from adaptyst_top.placement.kernels import available_devices, make_inputs
from adaptyst_top.placement.task_api import TASK_SPEC, parse_key
from adaptyst_top.runtime.model_store import DIR_ENV
from adaptyst_top.snapshot import Snapshot
from adaptyst_top.tui.advisor_rows import move_row, task_row
from tests.support.bpf_objects import none_left
from tests.support.marks import requires_root

# serial: which device runs faster, within a minute
pytestmark = [pytest.mark.serial, pytest.mark.ebpf, requires_root]


# PoCL's logistic map must beat numpy by this much, before and after the run, for a
# move to be owed: on this 2-vCPU VM it has run 2x faster, and as slow as the CPU for
# minutes at a time (CI: 22 against 20 ms), when no advisor should move it.
CLEAR_SPEEDUP = 1.3


def logistic_speedup() -> float:
    """The CPU's median time over PoCL's, on the demo's first phase's logistic map,
    interleaved runs of the same resident input, as the demo runs it."""
    devices = available_devices()
    inp = make_inputs("logistic", demo.PHASES[0].logistic)
    times: dict[str, list[float]] = {"cpu": [], "opencl:0": []}
    for _ in range(7):
        for name, ts in times.items():
            start = time.perf_counter()
            devices[name](inp)
            ts.append(time.perf_counter() - start)
    return statistics.median(times["cpu"]) / statistics.median(times["opencl:0"][1:])


def test_the_demo_moves_a_task_where_it_runs_faster_within_a_minute(tmp_path: Path) -> None:
    # Its own kept models: a move from nothing learned, whatever ran before it.
    env = {**os.environ, DIR_ENV: str(tmp_path)}
    before = logistic_speedup()
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "adaptyst_top.cli.start", "record", "--interval", "1"),
            *("--advisor", "--auto", "--probe", TASK_SPEC, "--"),
            # The claim: a move within a minute. The workload runs on for 20 s past that
            # (a fresh-clone run saw the move at 46 s of a 45 s workload: no runs after),
            # all in its first phase.
            *demo.command(phase_s=90, duration=80),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = logistic_speedup()
    snaps = [Snapshot.from_json(json.loads(x)) for x in proc.stdout.splitlines()]
    last = snaps[-1]
    assert last.advisor is not None
    real = [m for m in last.advisor.moves if not m.explore and m.to.startswith("opencl")]
    during = in_run_speedup(last, "logistic")
    told = (
        f"PoCL {before:.2f}x the CPU before, {during:.2f}x in the run (medians), "
        f"{after:.2f}x after\n{ran_where(last)}"
    )
    assert during > 0, told  # the advisor looked at PoCL: its runs are in the record
    if min(before, during, after) < CLEAR_SPEEDUP:
        # No clear gain on this machine now (CI: 2.4x before and 1.6x after, but PoCL's
        # looks in the run's first seconds, beside the monitor starting, no faster than
        # the CPU): no move is owed, and none may go where its runs were slower.
        assert all(m.measured_gain is None or m.measured_gain > -0.1 for m in real), told
        assert none_left()
        return
    assert real, told
    move = real[0]
    # Made within a minute of the start, as the move log says.
    assert move.t is not None and move.t - snaps[0].t < 60
    # The workload followed: many runs of that task on the new device ...
    runs = sum(
        p.count
        for p in last.probes
        if isinstance(p.key, str)
        and (k := parse_key(p.key))
        and k[0] == move.task
        and k[1] == move.to
    )
    assert runs > 20
    # ... each faster than on the device it left, as measured, and said so on screen:
    # the move log's measured gain, over those runs, and the task's row.
    # Where the task is now is where its last move took it (a slow spell of the node
    # may have sent it back since; the move's own figures above are the claim).
    task = next(t for t in last.tasks if t.task == move.task)
    latest = [m for m in last.advisor.moves if not m.explore and m.task == move.task][-1]
    assert task.device == latest.to, ran_where(last)
    assert move.predicted_gain is not None and move.predicted_gain > 0, move
    assert move.runs > 20 and move.measured_gain is not None and move.measured_gain > 0.1, move
    cells, _ = move_row(move)
    assert cells["measured"].startswith("+"), cells
    assert task_row(task)[0]["on"] == task.device
    assert none_left()


def in_run_speedup(snap: Snapshot, task: str) -> float:
    """The CPU's median run of TASK over PoCL's, in the record's own probe figures (0
    when PoCL never ran it)."""
    p50: dict[str, float] = {}
    for p in snap.probes:
        k = parse_key(p.key) if isinstance(p.key, str) else None
        if k and k[0] == task and p.p50_ns:
            p50[k[1]] = max(p50.get(k[1], 0.0), p.p50_ns)
    cpu, pocl = p50.get("cpu"), p50.get("opencl:0")
    return cpu / pocl if cpu and pocl else 0.0


def ran_where(snap: Snapshot) -> str:
    """What a failure needs said: every task's runs and mean time on each device, the
    advisor's moves and what it says now."""
    lines = [
        f"{k[0]} on {k[1]}: {p.count} runs, {(p.latency.mean_ns or 0) / 1e6:.2f} ms"
        for p in snap.probes
        if isinstance(p.key, str) and (k := parse_key(p.key))
    ]
    assert snap.advisor is not None
    lines += [str(m) for m in snap.advisor.moves] + [snap.advisor.detail]
    return "\n".join(lines)
