"""How far a sampled share may fairly lie from the truth a program measured."""

from __future__ import annotations


def share_bound(truth: float, samples: int) -> float:
    """How far a sampled share may lie from TRUTH over SAMPLES samples: 5 points, or 4.5
    standard errors where the machine's load left too few samples for 5 points to be
    a fair test (a share of n samples is off by sqrt(p(1 - p) / n))."""
    return max(0.05, 4.5 * (truth * (1 - truth) / max(samples, 1)) ** 0.5)
