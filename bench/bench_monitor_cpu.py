"""The monitor's own CPU use at 1 s refresh with ~50 probe rows and every pane, side by
side in the same run, all in tmux, with `top -d 1`, `htop -d 10` and two floors
(bench.textual_floor): Textual changing one line a second, and our presentation
alone repainting 45 rows that all change every second with nothing collected; and a
headless `record` of the same probes, which collects and draws nothing. Ours is also given from schedstat (ns, its UI thread
apart), which clock ticks only approximate.

    sudo .venv/bin/python -m bench.bench_monitor_cpu [--seconds 60] [--profile] [--json]

With --profile, the monitor profiles the target at 99 Hz with its profile screen open
(`f`) instead, beside a headless `record --profile` and `perf record -F 99 --call-graph
dwarf` of the same target (perf's own CPU, the target's apart).

The target is tests/support/targets/workload.c running `forever`; the probes are its
functions, a USDT pair split by task name, and libc's *printf* family in it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common
from tests.support.paths import REPO
from tests.support.workload import build

CLI = Path(sys.executable).parent / "adaptyst-top"
TICK = os.sysconf("SC_CLK_TCK")
FLOOR_ROWS = 45  # the probe rows the monitor shows here


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_ns(pid: int) -> tuple[int, int]:
    """The process's time on a CPU in ns, from each thread's schedstat (exact, where
    /proc/PID/stat counts clock ticks), and its main thread's (the UI, in the monitor)."""
    total = main = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
        total += ns
        if task.name == str(pid):
            main = ns
    return total, main


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
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    if os.geteuid() != 0:
        print("bench_monitor_cpu: needs root (eBPF)", file=sys.stderr)
        return 1
    binary = build(Path(tempfile.mkdtemp()))
    ours = "bench-ours"
    # The floor imports bench.*: it runs from the repository, as every benchmark does.
    floor = (
        f"cd {shlex.quote(str(REPO))} && exec {shlex.quote(sys.executable)} -m bench.textual_floor"
    )
    probes = (
        f"--probe 'uprobe:{binary}:*_fn' "
        f"--probe 'usdt:{binary}:adaptyst_test:task_begin..task_end@arg1' "
        f"--probe 'uprobe:c:*printf*' -- {binary} forever 300"
    )
    if args.profile:
        probes = f"--profile --profile-hz 99 -- {binary} forever 300"
    peers = {  # result name: command, each in a tmux session of its own
        "top": "exec top -d 1",
        "htop": "exec htop -d 10",
        "textual_floor": floor,
        "presentation_floor": f"{floor} --rows {FLOOR_ROWS}",
        # The same probes collected with no interface: what collecting alone costs.
        "record": f"exec {CLI} record --interval 1 --out /dev/null {probes}",
    }
    if args.profile:
        data = Path(tempfile.mkdtemp()) / "perf.data"
        peers["perf"] = (
            f"exec perf record -q -F 99 -e cpu-clock --call-graph dwarf -o {data} "
            f"-- {binary} forever 300"
        )
    sessions = [ours, *(f"bench-{name}" for name in peers)]
    for s in sessions:
        subprocess.run(["tmux", "kill-session", "-t", s], capture_output=True)
    cmd = f"exec {CLI} --interval 1 {probes}"
    for session, command in zip(sessions, (cmd, *peers.values()), strict=True):
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "60", command],
            check=True,
        )
    try:
        time.sleep(15)  # attach, calibrate, settle
        if args.profile:
            subprocess.run(["tmux", "send-keys", "-t", ours, "f"], check=True)
            time.sleep(2)
        pids = [pane_pid(s) for s in sessions]

        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", ours], capture_output=True, text=True
        ).stdout
        rows = sum(1 for ln in screen.splitlines() if "attached" in ln)
        before, t0 = [cpu_seconds(p) for p in pids], time.monotonic()
        ns0 = run_ns(pids[0])
        time.sleep(args.seconds)
        ns1 = run_ns(pids[0])
        after, t1 = [cpu_seconds(p) for p in pids], time.monotonic()
        pct = [100 * (a - b) / (t1 - t0) for a, b in zip(after, before, strict=True)]
        res: dict[str, float] = {"seconds": t1 - t0, "probe_rows_visible": rows}
        res["ours_pct_of_core"] = pct[0]
        # The same from schedstat, in ns: the ticks above are +-1 (0.017% over 60 s).
        res["ours_pct_of_core_ns"] = (ns1[0] - ns0[0]) / 1e7 / (t1 - t0)
        res["ours_ui_thread_pct_of_core_ns"] = (ns1[1] - ns0[1]) / 1e7 / (t1 - t0)
        for name, value in zip(peers, pct[1:], strict=True):
            res[f"{name}_pct_of_core"] = value
        res["ours_rss_mib"] = rss_mib(pids[0])
        for name in peers:
            res[f"ours_vs_{name}"] = pct[0] / max(1e-9, res[f"{name}_pct_of_core"])
        # The interface against the framework's floor, and the whole against drawing
        # plus collecting (the floor beside a headless record of the same probes).
        res["ours_ui_vs_textual_floor"] = res["ours_ui_thread_pct_of_core_ns"] / max(
            1e-9, res["textual_floor_pct_of_core"]
        )
        res["ours_vs_floor_plus_record"] = pct[0] / max(
            1e-9, res["textual_floor_pct_of_core"] + res["record_pct_of_core"]
        )
    finally:
        for s in sessions:
            subprocess.run(["tmux", "send-keys", "-t", s, "q"], capture_output=True)
        time.sleep(2)
        for s in sessions:
            subprocess.run(["tmux", "kill-session", "-t", s], capture_output=True)
    common.footer(res, args.json, width=22)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
