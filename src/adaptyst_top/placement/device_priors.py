"""What a device is expected to cost for a task before it ever ran it there: from the
device's kind (the inventory: a GPU, or an OpenCL device on the host's own cores) and
from what it already did for other tasks (its fastest run of anything: no run of a
task there will be faster than that).

A first run of a kernel on a device costs at least a launch, a copy of the input and,
on PoCL, a build for the size: 0.7 ms here for a 0.07 ms reduction, 4.9 ms for a
0.014 ms GEMM (bench/placement_eval.py rows). A task whose runs take 12 µs cannot pay
for that look out of a tenth of its runs until it has run 40,000 times, and nothing
there would win it back: it is not looked at. A 20M-element reduction that takes
15 ms a run on 16 vCPUs can, at its first decision, on a GPU (the H200's runs of
anything: 0.05 ms and more, bench/h200/placement_rows.json).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from adaptyst_top.placement.model import TaskDeviceModel


@dataclass(frozen=True)
class KindPrior:
    first_run_s: float  # what a first run there costs at least (launch, copy, build)
    cost: float  # a first run's cost beyond the current device's, in its runs, assumed
    gain: float  # what the device might save per run, optimistically


# The host's own cores through another runtime (PoCL): as likely slower as faster, up
# to 70x (its GEMM), so the first look is assumed at twice the current run (as before
# kinds were known); a GPU: a first look no slower than the current run where that
# run is long enough to hide the launch, and up to 190x faster (the H200's reduction).
SAME_CORES = KindPrior(first_run_s=0.7e-3, cost=1.0, gain=0.5)
GPU = KindPrior(first_run_s=0.5e-3, cost=0.0, gain=0.9)
PRIORS = {"gpu": GPU, "cpu": SAME_CORES}


def kind_of(device: str, kinds: dict[str, str]) -> str:
    """The device's kind as the inventory said ("gpu" | "cpu"), else from its name:
    CUDA is a GPU; an OpenCL device not described is taken for the host's cores."""
    if device in kinds:
        return kinds[device]
    return "gpu" if device.startswith("cuda") else "cpu"


def fastest_run(models: Iterable[TaskDeviceModel], device: str) -> float | None:
    """The device's fastest run of any task at any input (seconds), None before any."""
    runs = [r.lo for m in models if m.device == device for r in m.time.values() if r.n > 0]
    return min(runs) if runs else None


def first_look(kind: str, floor_s: float | None, current_s: float) -> tuple[float, float]:
    """(cost, gain) of a first run on a device of KIND nothing predicts for this input,
    against the current device's CURRENT_S a run: the cost in runs of the current
    device beyond what it replaces, the gain a fraction of the current cost per run.
    FLOOR_S, the device's fastest run of anything, bounds the gain; the gain is 0 where
    the device cannot beat the current run at all."""
    prior = PRIORS.get(kind, SAME_CORES)
    if current_s <= 0:
        return prior.cost, prior.gain
    first = max(prior.first_run_s, floor_s or 0.0)
    cost = max(prior.cost, first / current_s - 1)
    gain = prior.gain if floor_s is None else min(prior.gain, 1 - floor_s / current_s)
    return cost, max(0.0, gain)
