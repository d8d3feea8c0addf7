"""First looks at a device nothing predicts for a task: priced from its kind and from
its fastest run of anything (placement/device_priors.py)."""

from __future__ import annotations

from adaptyst_top.placement.device_priors import (
    GPU,
    HOST,
    SAME_CORES,
    first_look,
    kind_of,
)
from experiments.placement.baseline.advisor import Advisor
from experiments.placement.baseline.exploration import EXPLORE_SHARE
from tests.unit.experiments.test_baseline_advisor import _drive, per_item


def test_a_task_too_short_to_pay_for_a_first_look_is_not_looked_at() -> None:
    # 12 us a run (GEMM 96 on numpy): a first run on PoCL costs at least 0.7 ms, more
    # than a tenth of 300 runs; it took 4.9 ms here, 400 runs' worth.
    adv = Advisor(["cpu", "opencl:0"])
    ran, advice = _drive(adv, per_item({"cpu": 1.3e-9, "opencl:0": 500e-9}), [9_216] * 300)
    assert set(ran) == {"cpu"} and advice == []
    # Longer runs pay for it: looked at within the tenth of its runs.
    adv = Advisor(["cpu", "opencl:0"])
    ran, _ = _drive(adv, per_item({"cpu": 1.3e-7, "opencl:0": 500e-7}), [9_216] * 300)
    assert "opencl:0" in ran and ran.index("opencl:0") < 300 * EXPLORE_SHARE + 5


def test_a_gpu_is_looked_at_in_a_long_task_s_first_decision() -> None:
    # 15 ms a run on the CPU (a 20M-element reduction on 16 vCPUs), 0.08 ms on an H200
    # (results/h200/placement_rows.json): the GPU is looked at at the first decision and
    # the task moves there within ten runs.
    adv = Advisor(["cpu", "cuda"])
    ran, advice = _drive(adv, per_item({"cpu": 0.75e-9, "cuda": 4e-12}), [20_000_000] * 60)
    assert ran.index("cuda") == 5  # the run after the first decision
    assert ("cuda", False) in advice
    assert all(d == "cuda" for d in ran[10:])
    # An OpenCL GPU named as the inventory describes it: the same.
    adv = Advisor(["cpu", "opencl:1"], kinds={"opencl:1": "gpu"})
    ran, _ = _drive(adv, per_item({"cpu": 0.75e-9, "opencl:1": 4e-12}), [20_000_000] * 30)
    assert ran.index("opencl:1") == 5
    # The same task on PoCL's device (the host's cores): it waits for its budget.
    assert kind_of("opencl:0", {}) == "cpu" and kind_of("cuda", {}) == "gpu"


def test_a_first_look_is_priced_by_the_device_s_kind() -> None:
    # Unknown: the kind's figures; a first run at least the kind's, in current runs.
    assert first_look("gpu", 15e-3) == (GPU.cost, GPU.gain)
    cost, gain = first_look("cpu", 0.1e-3)
    assert cost == SAME_CORES.first_run_s / 0.1e-3 - 1 and gain == SAME_CORES.gain
    assert first_look("host", 1e-6) == (HOST.cost, HOST.gain)  # numpy has no launch
    assert kind_of("cpu", {"cpu": "gpu"}) == "host"


def test_a_short_input_after_a_long_one_looks_back_at_the_host() -> None:
    # Seen in placement_eval (unseen shift, the logistic map 2x10^6 -> 50,000 items):
    # moved to PoCL for the large input, the task must look at the CPU again for the
    # small one, where the CPU wins (0.67 against 0.95 ms), whatever it cost before.
    adv = Advisor(["cpu", "opencl:0"])
    cost = {"cpu": 37e-9, "opencl:0": 18e-9}
    ran, _ = _drive(adv, per_item(cost), [2_000_000] * 60)
    assert ran[-1] == "opencl:0"

    def small(dev: str, n: int) -> float:
        return {"cpu": 0.67e-3, "opencl:0": 0.95e-3}[dev]

    ran, advice = _drive(adv, small, [50_000] * 60, start="opencl:0")
    assert ("cpu", False) in advice and ran[-1] == "cpu"
