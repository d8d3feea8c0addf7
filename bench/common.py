"""What every benchmark prints first and last.

First (`header`): which benchmark, when, and on what: the CPU model, its cores, the
kernel, Python and the checkout's revision, since a figure means little without the
machine and the code it came from. Last (`footer`): the figures, then the ratios against
the peer measured in the same run, apart. With --json the header goes to stderr and the
footer is the one JSON line, so that stdout stays what a caller parses
(experiments/gpu/gpu_check.py reads the last line).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from adaptyst_top.collectors.devices.cpu import _cpu_model
from tests.support.paths import REPO


def revision() -> str:
    """The checkout's commit, with `+changes` where the tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode != 0:
            return "unknown"
        changed = subprocess.run(  # reads the index, never writes it (git status may)
            ["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--"],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return head.stdout.strip() + ("+changes" if changed.returncode != 0 else "")


def machine() -> dict[str, object]:
    """The date and the machine, as the header prints them."""
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": _cpu_model(),  # as the monitor names it
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "revision": revision(),
    }


def proc_mib(path: str, field: str) -> float:
    """FIELD of a /proc file that counts in kB (status' VmRSS, smaps_rollup's Anonymous),
    in MiB; 0 where the file does not have it."""
    with open(path) as f:
        for text in f:
            if text.startswith(f"{field}:"):
                return int(text.split()[1]) / 1024
    return 0.0


def header(as_json: bool = False) -> None:
    """The benchmark's first lines (to stderr with --json)."""
    m = machine()
    out = sys.stderr if as_json else sys.stdout
    print(f"{Path(sys.argv[0]).stem}  {m['date']}", file=out)
    print(
        f"machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, "
        f"Python {m['python']}, revision {m['revision']}",
        file=out,
        flush=True,
    )


def is_ratio(key: str) -> bool:
    """A figure against another one: its name says `ratio` or `vs`."""
    return not {"ratio", "ratios", "vs"}.isdisjoint(key.split("_"))


def line(key: str, value: object, width: int, spec: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{key:<{width}} {value:{spec}}"
    text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return f"{key:<{width}} {text}"


def footer(
    res: Mapping[str, object],
    as_json: bool,
    *,
    width: int = 28,
    spec: str = "10.3f",
    indent: int | None = None,
) -> None:
    """The benchmark's last lines: its figures, then its ratios against the peer; with
    --json all of them as one JSON value instead."""
    if as_json:
        print(json.dumps(res, indent=indent))
        return
    ratios = [k for k in res if is_ratio(k)]
    for k in res:
        if k not in ratios:
            print(line(k, res[k], width, spec))
    if ratios:
        print("against the peer in this run:")
        for k in ratios:
            print(line(k, res[k], width, spec))
