"""Snapshot entries as table rows: cells (text), sort values and a style. Pure functions."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, get_args

from adaptyst_top.collectors.probes.kinds import KINDS, KINDS_HELP
from adaptyst_top.placement.task_keys import PYTHON_SITES_PREFIX, parse_key
from adaptyst_top.snapshot import (
    CommandState,
    DeviceReading,
    EnergySource,
    ProbeEntry,
)
from adaptyst_top.tui.columns import Column
from adaptyst_top.tui.format import (
    fmt_bytes,
    fmt_count,
    fmt_energy,
    fmt_latency,
    fmt_ns,
    fmt_rate,
)
from adaptyst_top.tui.glyphs import bar, sparkline
from adaptyst_top.tui.rank_view import imbalance_cell

PROBE_COLUMNS = (
    Column(
        "state",
        "State",
        8,
        priority=9,
        help="pending, attached, detached (space turned it off), ended (its process or session ended), error",
    ),
    Column(
        "kind",
        "Kind",
        6,
        priority=3,
        help=KINDS_HELP,
    ),
    Column(
        "target",
        "Target",
        12,
        priority=1,
        help="the binary or library probed (a Python task: the application; a device kernel: the device kind)",
    ),
    Column(
        "name",
        "Name / key",
        0,
        priority=10,
        help="the function or probe; a task's rows read TASK @DEVICE n~2^K fF: its runs on DEVICE with inputs of 2^K to 2^(K+1) elements and feature bucket F (set by the application, e.g. density)",
    ),
    Column(
        "count",
        "Calls",
        9,
        right=True,
        priority=8,
        help="calls counted in the kernel since attach (exact, not sampled)",
    ),
    Column(
        "rate",
        "Calls/s",
        9,
        right=True,
        priority=7,
        help="calls per second over the last interval",
    ),
    Column(
        "mean",
        "Mean",
        8,
        right=True,
        priority=5,
        help="mean latency, net of the probe's own cost; <1 µs: below what that cost leaves certain",
    ),
    Column(
        "p50",
        "p50",
        8,
        right=True,
        priority=6,
        help="median latency (from a log2 histogram in the kernel)",
    ),
    Column(
        "p95",
        "p95",
        8,
        right=True,
        priority=2,
        help="95th-percentile latency",
    ),
    Column(
        "p99",
        "p99",
        8,
        right=True,
        priority=6,
        help="99th-percentile latency (yellow past the warning threshold)",
    ),
    Column(
        "max",
        "Max",
        8,
        right=True,
        priority=2,
        help="the longest call seen",
    ),
    Column(
        "cost",
        "Cost/hit",
        9,
        right=True,
        priority=4,
        help="what one hit of the probe costs the target (measured at start); '*': more than"
        " the fastest call took inside it, so less was taken off (the detail says how much)",
    ),
    Column(
        "energy",
        "J/call",
        8,
        right=True,
        priority=2,
        help="joules per call: the energy attributed to its calls (docs/probes.md)",
    ),
    Column(
        "imbalance",
        "Imbal",
        8,
        right=True,
        priority=7,
        help="a job's (or --ranks') rows: the most time (count-only: calls) one rank spent in "
        "it over the ranks' mean, and that rank (r3); per rank or node (R), each one's over "
        "the mean",
    ),
)
# The first is the default: the row whose calls took most time in all, on top.
SORTABLE = ("total", "count", "rate", "mean", "p99", "cost", "energy", "imbalance", "name")

DEVICE_COLUMNS = (
    Column(
        "name",
        "Device",
        0,
        priority=10,
        help="a device; └ lines under a GPU are its processes",
    ),
    Column(
        "util",
        "Util",
        16,
        priority=9,
        help="utilisation over the last interval",
    ),
    Column(
        "hist",
        "History",
        20,
        priority=3,
        help="utilisation over the last intervals, newest on the right",
    ),
    Column(
        "mem",
        "Memory",
        19,
        right=True,
        priority=6,
        help="memory used / total",
    ),
    Column(
        "power",
        "Power",
        8,
        right=True,
        priority=7,
        help="power over the last interval",
    ),
    Column(
        "energy",
        "Energy (source)",
        0,
        priority=8,
        help=f"energy since start and where it comes from ({', '.join(get_args(EnergySource))}), or why none; without RAPL, --cpu-power-model IDLE_W:MAX_W estimates the CPU's",
    ),  # its note is what to read
    Column(
        "temp",
        "Temp",
        6,
        right=True,
        priority=2,
        help="temperature",
    ),
)


GPU_PROCESS_ROWS = 3  # a GPU's own processes shown under it; the rest on one line


def _whole(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def gpu_process_rows(d: DeviceReading) -> list[tuple[str, dict[str, str]]]:
    """A GPU's processes as rows under its own, as nvitop lists them: the user's largest
    by memory with their SM share, then the rest of theirs and the other users' each in
    one line (a user is never shown another user's PID: collectors/devices/nvml.py). Keys are
    the device's id and the PID. Entries a damaged recording mangled are left out."""
    raw = d.extra.get("processes")
    procs = [
        p
        for p in (raw if isinstance(raw, list) else [])
        if isinstance(p, dict) and _whole(p.get("pid"))
    ]
    procs.sort(key=lambda p: -(_whole(p.get("mem_bytes")) or 0))
    rows: list[tuple[str, dict[str, str]]] = []
    for p in procs[:GPU_PROCESS_ROWS]:
        sm, name, mem = p.get("sm_util"), p.get("name"), _whole(p.get("mem_bytes"))
        joules = p.get("energy_j")
        label = f" └ {p['pid']} {name}" if isinstance(name, str) else f" └ {p['pid']}"
        rows.append(
            (
                f"{d.id}/{p['pid']}",
                {
                    "name": label,
                    "util": f"SM {sm * 100:.0f}%"
                    if isinstance(sm, (int, float)) and 0 <= sm <= 1
                    else "",
                    "mem": "-" if mem is None else fmt_bytes(mem),
                    # Its share of the GPU's energy by its SM utilisation (gpu_energy.py).
                    "energy": fmt_energy(joules)
                    if isinstance(joules, (int, float)) and 0 <= joules < float("inf")
                    else "",
                },
            )
        )
    rest = procs[GPU_PROCESS_ROWS:]
    if rest:
        mem = sum(_whole(p.get("mem_bytes")) or 0 for p in rest)
        rows.append((f"{d.id}/more", {"name": f" └ {len(rest)} more", "mem": fmt_bytes(mem)}))
    others = d.extra.get("processes_of_others")
    if isinstance(others, dict) and (count := _whole(others.get("count"))):
        mem = _whole(others.get("mem_bytes"))
        rows.append(
            (
                f"{d.id}/others",
                {
                    "name": f" └ {count} of other users",
                    "mem": "-" if mem is None else fmt_bytes(mem),
                },
            )
        )
    return rows


def app_name(command: CommandState | None) -> str | None:
    """The launched application as its user knows it: a Python script or module by its
    name (not `python3`), anything else by its program's name."""
    if command is None or not command.argv:
        return None
    prog = os.path.basename(command.argv[0])
    if prog.startswith("python"):
        args = iter(command.argv[1:])
        for a in args:
            if a == "-m":
                return next(args, prog).rsplit(".", 1)[-1]
            if a == "-c":
                return prog
            if not a.startswith("-"):
                return os.path.basename(a)
    return prog


def joules_per_call(p: ProbeEntry) -> float | None:
    return p.energy_j / p.count if p.energy_j is not None and p.count else None


def probe_row(
    p: ProbeEntry, p99_warn_ns: float, app: str | None = None
) -> tuple[dict[str, str], dict[str, Any], str]:
    """APP: the application's name, shown for task probes of the Python task API (whose
    probed file is the API's extension, which no user would recognise)."""
    name = p.name
    if p.kind in KINDS:
        name = KINDS[p.kind].shown_name(name)
    task = parse_key(p.key) if isinstance(p.key, str) else None
    if task is not None:  # the task API's key: task|device|log2 size|feature bucket
        name = f"{task[0]} @{task[1]} n~2^{task[2]}" + (f" f{task[3]}" if task[3] else "")
    elif p.key is not None and str(p.key) != name:  # a kernel's row: its name is its key
        name = f"{p.key} · {name}"
    kind = KINDS.get(p.kind or "")
    target = kind.shown_target(p.target or "") if kind else os.path.basename(p.target or "")
    if task is not None and target.startswith(PYTHON_SITES_PREFIX):
        target = app or "python app"
    cells = {
        "state": p.state,
        "kind": p.kind or "",
        "target": target,
        "name": name if not p.error else f"{p.spec}: {p.error}",
        "count": fmt_count(p.count),
        "rate": fmt_rate(p.rate_hz),
        "mean": fmt_latency(p.mean_ns),
        "p50": fmt_latency(p.p50_ns),
        "p95": fmt_latency(p.p95_ns),
        "p99": fmt_latency(p.p99_ns),
        "max": fmt_latency(p.max_ns),
        "cost": fmt_ns(p.overhead_ns_per_hit) + ("*" if p.corrected_ns is not None else ""),
        "energy": "-" if (per_call := joules_per_call(p)) is None else fmt_energy(per_call),
        "imbalance": imbalance_cell(p),
    }
    sort = {
        # calls x mean: where the time went; then calls (sub-resolution ones, count-only)
        "total": (p.count * (p.mean_ns or 0.0), p.count),
        "count": p.count,
        "rate": p.rate_hz,
        "mean": p.mean_ns or 0.0,
        "p99": p.p99_ns or 0.0,
        "cost": (p.overhead_ns_per_hit or 0.0) * p.rate_hz,
        "energy": per_call or 0.0,
        "imbalance": p.imbalance or 0.0,
        "name": name.lower(),
    }
    style = ""
    if p.state == "error":
        style = "error"
    elif p.state in ("detached", "ended", "pending"):
        style = "dim"
    elif (p.p99_ns or 0) > p99_warn_ns:
        style = "warn"
    return cells, sort, style


def device_row(
    d: DeviceReading, history: Sequence[float | None], ascii: bool, util_warn: float
) -> tuple[dict[str, str], str]:
    util = d.util
    util_text = "   -" if util is None else f"{util * 100:4.0f}%"
    mem_used, mem_total = d.mem_used_bytes, d.mem_total_bytes
    mem = (
        "-"
        if mem_used is None and mem_total is None
        else (
            f"{fmt_bytes(mem_used)}/{fmt_bytes(mem_total)}"
            if mem_used is not None
            else fmt_bytes(mem_total)
        )
    )
    if d.energy_j is not None:
        energy = f"{fmt_energy(d.energy_j)} ({d.energy_source})"
    else:
        energy = "- " + (d.note or "unmeasured")
    cells = {
        "name": d.name or d.id,
        "util": f"{bar(util, 10, ascii)} {util_text}",
        "hist": sparkline(list(history), 20, ascii, top=1.0),
        "mem": mem,
        "power": "-" if d.power_w is None else f"{d.power_w:.1f} W",
        "energy": energy,
        "temp": "-" if d.temp_c is None else f"{d.temp_c:.0f}°C",
    }
    style = "warn" if util is not None and util >= util_warn else ""
    if "lost" in d.note:
        style = "error"
    return cells, style
