"""What the advisor minimises: declared once for the advisor, the command line and Dask."""

from __future__ import annotations

import typing
from typing import Literal

# time; energy (joules); edp (energy x delay); weighted (a user's mix of the two)
Objective = Literal["time", "energy", "edp", "weighted"]
OBJECTIVES: tuple[Objective, ...] = typing.get_args(Objective)


def objective_cost(
    objective: Objective,
    weight: float,
    time_s: float,
    energy_j: float | None,
    ref_time_s: float,
    ref_energy_j: float | None,
) -> float:
    """A run's cost in the objective's terms; the weighted mix is scaled by a reference
    run's (the current device's). Energy unknown on either side: time alone."""
    if objective == "time" or energy_j is None or not ref_energy_j or not ref_time_s:
        return float(time_s)
    if objective == "energy":
        return float(energy_j)
    if objective == "edp":
        return float(energy_j * time_s)
    return float(weight * time_s / ref_time_s + (1 - weight) * energy_j / ref_energy_j)
