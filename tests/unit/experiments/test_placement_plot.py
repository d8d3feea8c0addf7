"""experiments/placement/placement_plot.py: the figure of a placement_eval.py run, from its rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

PLOT = [sys.executable, "-m", "experiments.placement.placement_plot"]


def row(task: str, best: str, devices: list[str], explored: list[bool]) -> dict[str, object]:
    regret = [0.5 * i for i in range(len(devices) - 1)]
    return {
        "task": task,
        "n": 1000,
        "objective": "time",
        "best": best,
        "run_devices": devices,
        "run_explored": explored,
        "regret": regret,
        "run_devices_warm": [best] * len(devices),
        "run_explored_warm": [False] * len(devices),
        "regret_warm": [0.0] * (len(devices) - 1),
    }


def test_the_figure_is_drawn_from_a_run_s_rows(tmp_path: Path) -> None:
    rows = [
        row("spmv", "opencl:0", ["cpu"] * 5 + ["opencl:0"] * 5, [False] * 5 + [True] + [False] * 4),
        row("gemm", "cpu", ["cpu"] * 10, [False] * 10),
    ]
    totals = {
        "optimal": 2,
        "cases": 2,
        "vs_static_cpu_incl_learning": 1.1,
        "vs_static_cpu_incl_learning_warm": 1.2,
        "vs_best_static_incl_learning": 0.9,
        "vs_best_static_incl_learning_warm": 1.0,
    }
    saved = tmp_path / "rows.json"
    saved.write_text(json.dumps({"rows": rows, "shifts": [], "totals": totals}))
    for out in (tmp_path / "run.png", tmp_path / "run.svg"):
        cmd = [*PLOT, str(saved), str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        data = out.read_bytes()
        assert data.startswith(b"\x89PNG") if out.suffix == ".png" else b"<svg" in data[:2000]
        if out.suffix == ".svg":
            text = data.decode()
            assert "spmv n=1000 time" in text and "cumulative regret" in text


def test_a_file_that_is_not_a_run_s_rows_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "rows.json"
    bad.write_text('{"rows": [')
    proc = subprocess.run(
        [*PLOT, str(bad), str(tmp_path / "x.png")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and not (tmp_path / "x.png").exists()
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
