"""End to end, as root: a task-API application under `record --advisor --auto`; its task
times come from USDT, a phase change makes the advisor move a task, and the application
really runs it where it was told. The application's costs per device are set (sleeps),
so the move does not hang on PoCL's speed on a shared VM; the demo's real kernels are
tested against numpy in test_kernels.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adaptyst_top.placement.learned_advisor import LOOK_RUNS
from adaptyst_top.placement.task_api import TASK_SPEC, parse_key
from tests.support.bpf_objects import none_left
from tests.support.marks import requires_root
from tests.support.paths import TARGETS

# serial: which device runs faster
pytestmark = [pytest.mark.serial, pytest.mark.ebpf, requires_root]
APP = TARGETS / "timed_tasks.py"


def test_demo_under_the_advisor_moves_and_the_workload_follows() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "adaptyst_top.cli.start",
            "record",
            "--interval",
            "1",
            "--advisor",
            "--auto",
            "--cpu-power-model",
            "20:120",
            "--probe",
            TASK_SPEC,
            "--",
            sys.executable,
            str(APP),
            "8",
            "34",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    snaps = [json.loads(x) for x in proc.stdout.splitlines()]
    last = snaps[-1]
    assert {t["task"] for t in last["tasks"]} == {"work"}
    # Task times came from the USDT pair, split by task|device|size|feature.
    rows = {p["key"]: p for p in last["probes"] if isinstance(p.get("key"), str)}
    parsed = {k: parse_key(k) for k in rows}
    assert all(v is not None for v in parsed.values()) and rows
    assert all(p["state"] == "ended" and p["p50_ns"] > 0 for p in rows.values() if p["count"])
    # Every task has an energy estimate per run, labelled by its source (the model here).
    assert any(any(v["energy_j"] for v in t["predicted"].values()) for t in last["tasks"])
    moves = last["advisor"]["moves"]
    # Pushed to the application (a move made as it was exiting may find it gone).
    assert moves and all(m["sent"] >= 1 for m in moves[:-1]), moves
    # Explorations first: the application ran on the other device too.
    assert [m for m in moves if m["explore"]]
    on_other = [p["count"] for k, p in rows.items() if parsed[k] and parsed[k][1] != "cpu"]  # type: ignore[index]
    assert on_other and min(on_other) >= 1
    # A real move (not an exploration) after a phase change, and the runs followed it.
    real = [m for m in moves if not m["explore"]]
    assert real, moves
    target = real[0]
    followed = sum(
        p["count"]
        for k, p in rows.items()
        if parsed[k] and parsed[k][0] == target["task"] and parsed[k][1] == target["to"]
    )
    assert followed > LOOK_RUNS
    assert none_left()
