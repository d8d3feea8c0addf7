"""The probes' cost against the budget: what the hits of the last interval cost (each
row's hits times its cost class's figure), as a share of the target's CPU time over the
same interval (of the node's busy time when there is no target)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from adaptyst_top.collectors.energy.busy import system_busy_ns
from adaptyst_top.collectors.probes.cost.table import CostTable
from adaptyst_top.collectors.probes.model import Row
from adaptyst_top.system.targets import process_cpu_ns


@dataclass(frozen=True)
class Overhead:
    share: float | None  # None until two readings
    costliest: int | None  # the row that cost most, when the share is over the budget


def share_text(share: float) -> str:
    """A share as a person reads it at a glance: whole percent from 10% up, else one
    decimal (33%, 2.4%, 0.1%). A figure that moves by a tenth of a point at 30% says
    nothing more and repaints its line every second."""
    return f"{share:.0%}" if share >= 0.095 else f"{share:.1%}"


def budget_text(budget: float) -> str:
    """A budget as it was given (--budget 0.05: 0.05%, never rounded to 0%)."""
    return f"{budget * 100:g}%"


def interval_cost_ns(row: Row, costs: CostTable) -> float:
    """What ROW's hits in the last interval cost the target: a sampled row's timed ones
    at its class's cost, the rest at its count class's."""
    per_hit = costs.get(row.cost_class).per_hit_ns
    if row.count_class is None:
        return row.interval_hits * per_hit
    counted = max(0, row.interval_hits - row.interval_timed)
    return row.interval_timed * per_hit + counted * costs.get(row.count_class).per_hit_ns


class BudgetWatch:
    """pids: the target's processes now (None: the whole node)."""

    def __init__(self, pids: Callable[[], Iterable[int]] | None, budget: float) -> None:
        self.pids = pids
        self.budget = budget
        self._last: dict[int, int] | None = None
        self._share: float | None = None  # the last share measured

    def _cpu(self) -> dict[int, int] | None:
        if self.pids is None:
            return {-1: system_busy_ns()}
        out = {}
        for pid in self.pids():
            ns = process_cpu_ns(pid)
            if ns is not None:
                out[pid] = ns
        return out

    def update(self, rows: Sequence[Row], costs: CostTable, dt: float | None) -> Overhead:
        cpu = self._cpu()
        last, self._last = self._last, cpu
        if cpu is None or last is None or dt is None:
            return Overhead(None, None)
        # Over the processes read both times: one that came or went mid-interval would
        # count its whole life, or less than nothing.
        cpu_delta = sum(ns - last[pid] for pid, ns in cpu.items() if pid in last)
        if cpu_delta <= 0:
            # Not measured: the target ended in the interval (its CPU time is no longer
            # there to read; the last line of every `record` read 100% here), or ran less
            # than a clock tick. The last share measured stands; nothing is warned.
            return Overhead(self._share, None)
        # Rows hit in the interval only: most rows of a wide glob are idle.
        cost = {r.id: interval_cost_ns(r, costs) for r in rows if r.interval_hits}
        total = sum(cost.values())
        # Probe time is charged to the target's own CPU time, so it sits inside cpu_delta.
        share = self._share = total / cpu_delta
        if share <= self.budget:
            return Overhead(share, None)
        return Overhead(share, max(cost, key=lambda i: cost[i]))
