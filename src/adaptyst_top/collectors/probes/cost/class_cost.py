"""What one cost class costs per hit, in ns: a kind declares each of its classes with
the figures used before calibration answers (`ProbeKindDef.cost_classes`)."""

from __future__ import annotations

from dataclasses import dataclass

LEAST_KEPT = 0.75


@dataclass(frozen=True)  # shared: each kind's defaults, every table's entries
class ClassCost:
    """Per-hit cost of one class with this tool's handlers, in ns."""

    per_hit_ns: float  # added to the traced program per call (entry + return)
    in_interval_ns: float  # of that, what falls inside a measured latency (the median)
    source: str  # "calibrated" or "default"
    # The least of it seen (None: unknown), on the calibration's function.
    least_in_interval_ns: float | None = None

    @property
    def least_ns(self) -> float:
        """What a row's minimum is net of: so that no net minimum reads below the fastest
        call, three quarters of the least seen (another site's least, or the same one's
        on a busy node, read up to 100 ns below the calibration's: bench_net_latency)."""
        least = self.least_in_interval_ns
        least = self.in_interval_ns if least is None else min(least, self.in_interval_ns)
        return LEAST_KEPT * least
