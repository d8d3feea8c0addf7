"""The advisor pane's rows, built from a snapshot without Textual: a row per task (where
it runs, where the models would put it, each device's time per run, the gain and how
sure), a row per move (the gain predicted when moving and the gain measured after),
and the state line above them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from adaptyst_top.snapshot import AdviceEntry, AdvisorState, Move, TaskEntry
from adaptyst_top.tui.columns import Column
from adaptyst_top.tui.format import fmt_energy, fmt_ns

TASK_COLUMNS = (
    Column(
        "task",
        "Task",
        0,
        priority=10,
        help="a task the application reported (adaptyst:task_begin..task_end)",
    ),
    Column(
        "on",
        "On",
        10,
        priority=9,
        help="the device it runs on now",
    ),
    Column(
        "best",
        "Best",
        10,
        priority=8,
        help="the device the models say for its current input and the objective",
    ),
    Column(
        "times",
        "Time per run (~ predicted)",
        0,
        priority=6,
        help="each device's predicted time per run, fastest first; ~: from other input sizes, not this one; ±N% or ×N: one sigma of the prediction",
    ),
    Column(
        "energy",
        "Energy/run",
        10,
        right=True,
        priority=2,
        help="energy of one run where it runs now",
    ),
    Column(
        "gain",
        "Gain",
        11,
        right=True,
        priority=8,
        help="what Best saves over On, in the objective's terms (N.Nx slower: a loss)",
    ),  # "+31%", "2.6x slower"
    Column(
        "confidence",
        "Conf.",
        5,
        right=True,
        priority=3,
        help="how sure, 0..1: the posterior probability that Best gains over On",
    ),
    Column(
        "state",
        "State",
        9,
        priority=7,
        help="learning (a device that may win has no warm run yet), exploring (a few runs to measure one), settled (On is Best), in noise (gain under the move threshold), holding (a move at the next decision), untried / unsure (recordings of the advisor before the learner), m: move / explore? (advice waiting for m)",
    ),
    Column(
        "runs",
        "Runs",
        7,
        right=True,
        priority=4,
        help="runs seen",
    ),
)
MOVE_COLUMNS = (
    Column(
        "t",
        "At",
        7,
        right=True,
        priority=7,
        help="when it moved (minutes:seconds into the session)",
    ),
    Column("task", "Task", 0, priority=10, help="the task moved"),
    Column(
        "move",
        "Move",
        0,
        priority=9,
        help="from → to; explore: a few runs to measure a device (dim), not a choice",
    ),
    Column(
        "predicted",
        "Predicted",
        11,
        right=True,
        priority=8,
        help="the gain predicted when it moved",
    ),
    Column(
        "measured",
        "Measured",
        11,
        right=True,
        priority=8,
        help="the gain measured over the runs after it (yellow: it lost)",
    ),
    Column(
        "runs",
        "Runs after",
        10,
        right=True,
        priority=5,
        help="runs measured after the move",
    ),
)


SLOWER_FROM = 1.5  # a run this many times longer or more reads "N.Nx slower", not "-50%"


def pct(v: float | None) -> str:
    """A gain (the share of the run's time saved) as a person reads it: "+31%", and a
    loss of half the time or more as how many times slower ("-164%" said nothing)."""
    if v is None:
        return "-"
    if 1.0 - v >= SLOWER_FROM:
        return f"{1.0 - v:.1f}x slower"
    # A gain under 1% keeps a decimal: never a "+0%" that reads as no reason at all.
    return f"{v * 100:+.1f}%" if abs(v) < 0.01 else f"{v * 100:+.0f}%"


def _number(p: Mapping[str, Any], key: str) -> float | None:
    v = p.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def device_times(t: TaskEntry, ascii: bool = False) -> str:
    """Each device's time per run on the task's input, fastest first; '~' marks a
    prediction (fitted over sizes or from another device's ratio), not a measurement;
    '±N%' the learner's one sigma."""
    cells = []
    for device, p in t.predicted.items():
        time_s = _number(p, "time_s")
        if time_s is None:
            continue
        mark = "" if p.get("source", "measured") == "measured" else "~"
        cells.append((time_s, f"{device} {mark}{fmt_ns(time_s * 1e9)}{spread(p, ascii)}"))
    return (" | " if ascii else " · ").join(text for _, text in sorted(cells))


SPREAD_AS_FACTOR = 2.0  # a sigma this wide reads "x12" (within 12x either way), not "±1100%"


def spread(p: Mapping[str, Any], ascii: bool = False) -> str:
    """One sigma of the learner's prediction: " ±8%" while narrow, " ×12" when wide
    (the band runs from a twelfth to twelve times: no "±" says that); "" without one."""
    factor = _number(p, "time_factor")
    if factor is None or not 1 < factor < 1e6:
        return ""
    if factor >= SPREAD_AS_FACTOR:
        return f" {'x' if ascii else '×'}{factor:.0f}"
    return f" ±{100 * (factor - 1):.0f}%"


def task_row(
    t: TaskEntry, advice: AdviceEntry | None = None, ascii: bool = False
) -> tuple[dict[str, str], str]:
    """(cells, style) of a task; pending advice (suggest mode) shows in Best and State."""
    here = t.predicted.get(t.device) or {}
    energy = _number(here, "energy_j")
    best, gain, state = t.best or "-", t.gain, t.state or "-"
    style = ""
    if advice is not None:
        best = advice.suggested
        state = "explore?" if advice.explore else "m: move"
        gain = advice.energy_gain if advice.time_gain is None else advice.time_gain
        style = "warn"
    cells = {
        "task": t.task,
        "on": t.device or "-",
        "best": best,
        "times": device_times(t, ascii) or "-",
        "energy": "-" if energy is None else fmt_energy(energy),
        "gain": "-" if best == t.device else pct(gain),
        "confidence": "-" if t.confidence is None else f"{t.confidence:.2f}",
        "state": state,
        "runs": f"{t.executions:,}",
    }
    return cells, style


def move_row(m: Move, ascii: bool = False) -> tuple[dict[str, str], str]:
    """(cells, style) of a move: plain when the measured gain holds what was predicted,
    'warn' when it lost, dim for an exploration (a few runs to measure a device, which
    is not a choice: it read like one)."""
    arrow = "->" if ascii else "→"
    at = "-" if m.t is None else f"{int(m.t) // 60}:{int(m.t) % 60:02d}"
    what = ("explore " if m.explore else "") + f"{m.source} {arrow} {m.to}"
    cells = {
        "t": at,
        "task": m.task,
        "move": what,
        "predicted": "to measure" if m.explore else pct(m.predicted_gain),
        "measured": pct(m.measured_gain) if m.runs else "-",
        "runs": f"{m.runs:,}",
    }
    if m.explore:
        return cells, "dim"
    lost = m.measured_gain is not None and m.measured_gain < 0
    return cells, "warn" if lost else ""


def move_key(m: Move) -> str:
    return f"{m.t}\x1f{m.task}\x1f{m.source}\x1f{m.to}"


def state_line(state: AdvisorState | None, tasks: Iterable[TaskEntry], mode: str) -> str:
    if state is None:
        return (
            f"advisor ({mode}): not running — start with --advisor and task probes "
            "(adaptyst:task_begin..task_end), or `adaptyst-top demo`"
        )
    settled = sum(1 for t in tasks if t.state == "settled")
    return (
        f"advisor {state.state or '?'} · {state.mode or mode} · objective "
        f"{state.objective or '?'} · {settled} settled · {state.detail}"
    )
