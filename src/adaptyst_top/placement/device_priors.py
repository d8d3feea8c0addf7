"""What a first look at a device is expected to cost for a task before it ever ran
it there, from the device's kind (the inventory: the host's own path, an OpenCL device
on the host's cores, a GPU) and the current device's run.

A first run of a kernel on an OpenCL device costs at least a launch, a copy of the
input and, on PoCL, a build for the size: 0.7 ms here for a 0.07 ms reduction, 4.9 ms
for a 0.014 ms GEMM (experiments/placement/placement_eval.py rows). A task whose runs
take 12 µs cannot pay for that look out of a tenth of its runs until it has run 40,000
times: it is not looked at before. A 20M-element reduction that takes 15 ms a run on 16
vCPUs can, at its first decision, on a GPU (the H200 ran it in 0.08 ms, and no kernel
there under 0.05 ms: results/h200/placement_rows.json).

A device's fastest run of other tasks or inputs says nothing of a first look's cost:
it bounds the launch from above, not from below (PoCL's 5 ms logistic map at 10^6
items beside its 0.13 ms SpMV at 3,000 rows).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindPrior:
    first_run_s: float  # what a first run there costs at least (launch, copy, build)
    cost: float  # a first run's cost beyond the current device's, in its runs, assumed
    gain: float  # what the device might save per run, optimistically
    min_run_s: float = 0.0  # the least a warm run takes there, whatever its size


# The host's own cores through another runtime (PoCL): as likely slower as faster, up
# to 70x (its GEMM), so the first look is assumed at twice the current run (as before
# kinds were known); a GPU: a first look no slower than the current run where that
# run is long enough to hide the launch, and up to 190x faster (the H200's reduction).
# Least warm runs: PoCL's SpMV at 3,000 rows, 0.13 ms here; no H200 kernel under 0.05 ms.
SAME_CORES = KindPrior(first_run_s=0.7e-3, cost=1.0, gain=0.5, min_run_s=0.1e-3)
GPU = KindPrior(first_run_s=0.5e-3, cost=0.0, gain=0.9, min_run_s=0.04e-3)
HOST = KindPrior(first_run_s=0.0, cost=1.0, gain=0.5)  # numpy/scipy: no launch, no copy
PRIORS = {"gpu": GPU, "cpu": SAME_CORES, "host": HOST}
HOST_DEVICE = "cpu"  # the host's own path, as the advisor's targets name it


def kind_of(device: str, kinds: dict[str, str]) -> str:
    """The device's kind as the inventory said ("gpu" | "cpu"), else from its name:
    the host's own path, CUDA a GPU, an OpenCL device not described the host's cores."""
    if device == HOST_DEVICE:
        return "host"
    if device in kinds:
        return kinds[device]
    return "gpu" if device.startswith("cuda") else "cpu"


def first_look(kind: str, current_s: float) -> tuple[float, float]:
    """(cost, gain) of a first run on a device of KIND nothing predicts for this input,
    against the current device's CURRENT_S a run: the cost in runs of the current
    device beyond what it replaces (at least the kind's first run), the gain a fraction
    of the current cost per run, optimistic."""
    prior = PRIORS.get(kind, SAME_CORES)
    if current_s <= 0:
        return prior.cost, prior.gain
    return max(prior.cost, prior.first_run_s / current_s - 1), prior.gain


def floors_s(devices: list[str], kinds: dict[str, str]) -> dict[str, float]:
    """The least a warm run takes on each device, by its kind (the learner's floors)."""
    return {d: PRIORS.get(kind_of(d, kinds), SAME_CORES).min_run_s for d in devices}
