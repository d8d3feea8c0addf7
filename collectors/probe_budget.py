"""The probes' cost against the budget: what the hits of the last interval cost (each
row's hits times its cost class's figure), as a share of the target's CPU time over the
same interval (of the node's busy time when there is no target)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaptyst_top.collectors import overhead as ov
from adaptyst_top.collectors.probe_model import Row
from adaptyst_top.collectors.targets import process_cpu_ns


@dataclass(frozen=True)
class Overhead:
    share: float | None  # None until two readings
    costliest: int | None  # the row that cost most, when the share is over the budget


class BudgetWatch:
    def __init__(self, pid: int | None, budget: float) -> None:
        self.pid = pid
        self.budget = budget
        self._last_cpu: int | None = None

    def update(self, rows: Sequence[Row], costs: ov.CostTable, dt: float | None) -> Overhead:
        cpu = process_cpu_ns(self.pid) if self.pid is not None else ov.system_busy_ns()
        last, self._last_cpu = self._last_cpu, cpu
        if cpu is None or last is None or dt is None:
            return Overhead(None, None)
        cpu_delta = cpu - last
        cost = {r.id: r.interval_hits * costs.get(r.cost_class).per_hit_ns for r in rows}
        total = sum(cost.values())
        # Probe time is charged to the target's own CPU time, so it sits inside cpu_delta.
        share = total / cpu_delta if cpu_delta > 0 else (None if total == 0 else 1.0)
        if share is None or share <= self.budget:
            return Overhead(share, None)
        return Overhead(share, max(cost, key=lambda i: cost[i]))
