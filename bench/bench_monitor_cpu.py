"""The monitor's own CPU use at 1 s refresh with ~50 probe rows and every pane, side by
side with `top -d 1`, `htop -d 10` and the framework's floor (bench/textual_floor.py: a
Textual app changing one line a second) in the same run, all in tmux (goal: <= 0.5% of
one core).

    sudo .venv/bin/python bench/bench_monitor_cpu.py [--seconds 60] [--json]

The target is tests/targets/workload.c running `forever`; the probes are its
functions, a USDT pair split by task name, and libc's *printf* family in it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.workload import build  # noqa: E402

CLI = Path(sys.executable).parent / "adaptyst-top"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def pane_pid(session: str) -> int:
    out = subprocess.run(
        ["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])


def child_named(parent: int, name: str) -> int:
    """The pane runs a shell; find the program under it."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            stat = (proc / "stat").read_text()
            comm = stat.split("(", 1)[1].rsplit(")", 1)[0]
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and name in comm:
            return int(proc.name)
    return parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_monitor_cpu: needs root (eBPF)", file=sys.stderr)
        return 1
    binary = build(Path(tempfile.mkdtemp()))
    ours, top, htop, floor = "bench-ours", "bench-top", "bench-htop", "bench-floor"
    peers = {
        top: "exec top -d 1",
        htop: "exec htop -d 10",
        floor: f"exec {sys.executable} {ROOT / 'bench' / 'textual_floor.py'}",
    }
    for s in (ours, *peers):
        subprocess.run(["tmux", "kill-session", "-t", s], capture_output=True)
    cmd = (
        f"exec {CLI} --interval 1 --probe 'uprobe:{binary}:*_fn' "
        f"--probe 'usdt:{binary}:adaptyst_test:task_begin..task_end@arg1' "
        f"--probe 'uprobe:c:*printf*' -- {binary} forever 300"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", ours, "-x", "120", "-y", "60", cmd], check=True
    )
    for session, peer in peers.items():
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "60", peer],
            check=True,
        )
    try:
        time.sleep(15)  # attach, calibrate, settle
        pid_ours, pid_top, pid_htop = pane_pid(ours), pane_pid(top), pane_pid(htop)
        pid_floor = pane_pid(floor)
        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", ours], capture_output=True, text=True
        ).stdout
        rows = sum(1 for ln in screen.splitlines() if "attached" in ln)
        pids = (pid_ours, pid_top, pid_htop, pid_floor)
        before, t0 = [cpu_seconds(p) for p in pids], time.monotonic()
        time.sleep(args.seconds)
        after, t1 = [cpu_seconds(p) for p in pids], time.monotonic()
        (a0, b0, c0, d0), (a1, b1, c1, d1) = before, after
        res = {
            "seconds": t1 - t0,
            "probe_rows_visible": rows,
            "ours_pct_of_core": 100 * (a1 - a0) / (t1 - t0),
            "top_pct_of_core": 100 * (b1 - b0) / (t1 - t0),
            "htop_pct_of_core": 100 * (c1 - c0) / (t1 - t0),
            "textual_floor_pct_of_core": 100 * (d1 - d0) / (t1 - t0),
            "ours_rss_mib": rss_mib(pid_ours),
        }
        res["ours_vs_top"] = res["ours_pct_of_core"] / max(1e-9, res["top_pct_of_core"])
        res["ours_vs_htop"] = res["ours_pct_of_core"] / max(1e-9, res["htop_pct_of_core"])
        res["ours_vs_textual_floor"] = res["ours_pct_of_core"] / max(
            1e-9, res["textual_floor_pct_of_core"]
        )
    finally:
        for s in (ours, *peers):
            subprocess.run(["tmux", "send-keys", "-t", s, "q"], capture_output=True)
        time.sleep(2)
        for s in (ours, *peers):
            subprocess.run(["tmux", "kill-session", "-t", s], capture_output=True)
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:<22} {v:10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
