"""What every placer answers in: an input's context, a device's predicted cost for it,
and the devices no other beats on both time and energy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Context = tuple[int, int]  # (size bucket, feature bucket)


@dataclass
class Prediction:
    time_s: float
    energy_j: float | None
    rel_err: float  # relative uncertainty of time_s
    samples: int
    source: str  # "measured" (this input bucket) or "fit"
    best_s: float | None = None  # the fastest measured run (interval mean) for this input

    def short(self) -> str:
        e = "" if self.energy_j is None else f", {self.energy_j * 1e3:.3g} mJ"
        return f"{self.time_s * 1e3:.3g} ms{e}"

    def to_json(self) -> dict[str, Any]:
        return {
            "time_s": self.time_s,
            "energy_j": self.energy_j,
            "rel_err": round(self.rel_err, 3),
            "samples": self.samples,
            "source": self.source,
        }


def pareto_front(preds: dict[str, Prediction]) -> list[tuple[str, float, float | None]]:
    """(device, time, energy) of the devices whose time and energy no other device
    beats on both, fastest first."""
    front = []
    for d, p in preds.items():
        dominated = any(
            q.time_s <= p.time_s
            and q.energy_j is not None
            and p.energy_j is not None
            and q.energy_j <= p.energy_j
            and (q.time_s < p.time_s or q.energy_j < p.energy_j)
            for o, q in preds.items()
            if o != d
        )
        if not dominated:
            front.append((d, p.time_s, p.energy_j))
    return sorted(front, key=lambda x: x[1])
