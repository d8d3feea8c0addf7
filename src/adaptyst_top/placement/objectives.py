"""What the advisor minimises: declared once for the advisor, the command line and Dask."""

from __future__ import annotations

import typing
from typing import Literal

# time; energy (joules); edp (energy x delay); weighted (a user's mix of the two)
Objective = Literal["time", "energy", "edp", "weighted"]
OBJECTIVES: tuple[Objective, ...] = typing.get_args(Objective)
