"""The figure of a placement_eval.py run: the learning curve (cumulative regret per
execution against each case's best device, cold and warm) and each case's decisions
(the device every execution ran on, explorations marked, the oracle's best beside).

    .venv/bin/python -m experiments.placement.placement_plot ROWS.json OUT.png
        (from placement_eval.py --rows FILE)
    .venv/bin/python -m experiments.placement.placement_eval --plot OUT.png
        (at the end of a run)

Needs the bench extra (matplotlib): pip install -e '.[bench]'.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # a file, never a window: this runs over SSH

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3")  # a device each


def case_label(row: dict[str, Any]) -> str:
    density = f" d={row['density']}" if row.get("density") else ""
    return f"{row['task']} n={row['n']}{density} {row['objective']}"


def curves(ax: Axes, rows: list[dict[str, Any]], key: str, colour: str, name: str) -> None:
    """Each case's cumulative regret, thin, and their mean, thick."""
    series = [r[key] for r in rows if r.get(key)]
    if not series:
        return
    for ys in series:
        ax.plot(range(2, len(ys) + 2), ys, color=colour, alpha=0.15, linewidth=0.8)
    width = min(len(ys) for ys in series)
    mean = [sum(ys[i] for ys in series) / len(series) for i in range(width)]
    ax.plot(range(2, width + 2), mean, color=colour, linewidth=2.2, label=f"{name}: mean")


def decisions(ax: Axes, rows: list[dict[str, Any]], suffix: str, devices: list[str]) -> None:
    """A row per case, a column per execution, coloured by the device it ran on; an
    exploration's runs dotted; the oracle's best device as a square at the right."""
    grid = [[devices.index(d) for d in r[f"run_devices{suffix}"]] for r in rows]
    width = max(len(g) for g in grid)
    grid = [g + [g[-1]] * (width - len(g)) for g in grid]
    cmap = ListedColormap(COLOURS[: len(devices)])
    ax.imshow(
        grid,
        aspect="auto",
        cmap=cmap,
        vmin=-0.5,
        vmax=len(devices) - 0.5,
        interpolation="nearest",
        extent=(0.5, width + 0.5, len(rows) - 0.5, -0.5),
    )
    for y, r in enumerate(rows):
        xs = [x + 1 for x, e in enumerate(r[f"run_explored{suffix}"]) if e]
        ax.scatter(xs, [y] * len(xs), s=4, color="white", marker="o", linewidths=0)
        ax.scatter(
            [width + 1.5],
            [y],
            s=18,
            marker="s",
            color=COLOURS[devices.index(r["best"])],
            clip_on=False,
        )
    ax.set_xlim(0.5, width + 2)
    ax.set_yticks(range(len(rows)), [case_label(r) for r in rows], fontsize=6)
    ax.set_xlabel("execution (dots: an exploration's runs; square: the oracle's best)")
    handles = [Rectangle((0, 0), 1, 1, color=COLOURS[i]) for i in range(len(devices))]
    ax.legend(handles, devices, loc="lower right", fontsize=7, framealpha=0.9)


def draw(everything: dict[str, Any], out: Path, title: str = "") -> None:
    """The figure of a run (`--rows` JSON: rows, shifts, totals) to OUT (.png, .svg)."""
    rows = everything["rows"]
    totals = everything["totals"]
    warm = any("run_devices_warm" in r for r in rows)
    devices = sorted(
        {d for r in rows for d in r["run_devices"]} | {r["best"] for r in rows},
        key=lambda d: (d != "cpu", d),
    )
    panels = 3 if warm else 2
    fig, axes = plt.subplots(
        panels,
        1,
        figsize=(10, 3.2 + 0.22 * len(rows) * (panels - 1)),
        gridspec_kw={"height_ratios": [1.2] + [0.25 * len(rows) / 2.5] * (panels - 1)},
    )
    ax = axes[0]
    curves(ax, rows, "regret", "#c44e52", "cold")
    if warm:
        curves(ax, rows, "regret_warm", "#4c72b0", "warm (models kept)")
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.set_xlabel("execution")
    ax.set_ylabel("cumulative regret\n(runs of the best device)")
    ax.set_yscale("symlog", linthresh=1.0)
    summary = (
        f"optimal {totals['optimal']}/{totals['cases']}; vs static CPU "
        f"{totals['vs_static_cpu_incl_learning']}x cold"
        + (f", {totals['vs_static_cpu_incl_learning_warm']}x warm" if warm else "")
        + f"; vs best static {totals['vs_best_static_incl_learning']}x cold"
        + (f", {totals['vs_best_static_incl_learning_warm']}x warm" if warm else "")
    )
    ax.set_title(f"{title}: {summary}".strip(": "), fontsize=9)
    ax.legend(fontsize=8)
    decisions(axes[1], rows, "", devices)
    axes[1].set_title("cold: where each execution ran", fontsize=9)
    if warm:
        decisions(axes[2], rows, "_warm", devices)
        axes[2].set_title("warm: where each execution ran", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: placement_plot.py ROWS.json OUT.png", file=sys.stderr)
        return 2
    try:
        everything = json.loads(Path(argv[0]).read_text())
        draw(everything, Path(argv[1]), title=Path(argv[0]).stem)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        print(f"placement_plot: {argv[0]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
