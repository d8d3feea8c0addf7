"""The cost of every class, calibrated where calibration answered, else the figures each
kind declares for its classes (measured on this kind of machine: docs/data-flow.md),
labelled as such."""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.kinds import KINDS

DEFAULT_COSTS: dict[str, ClassCost] = {
    name: cost for kind in KINDS.values() for name, cost in kind.cost_classes.items()
}


@dataclass
class CostTable:
    costs: dict[str, ClassCost] = field(default_factory=lambda: dict(DEFAULT_COSTS))
    error: str = ""  # why calibration could not run, when it could not

    def get(self, cls: str) -> ClassCost:
        return self.costs.get(cls) or DEFAULT_COSTS[cls]
