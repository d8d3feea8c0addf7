"""First looks at a device nothing predicts for a task: priced from its kind and from
its fastest run of anything (placement/device_priors.py)."""

from __future__ import annotations

from adaptyst_top.placement.advisor import Advisor
from adaptyst_top.placement.device_priors import (
    GPU,
    SAME_CORES,
    fastest_run,
    first_look,
    kind_of,
)
from adaptyst_top.placement.exploration import EXPLORE_SHARE

from .test_placement_model import _drive, per_item


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
    # (bench/h200/placement_rows.json): the GPU is looked at at the first decision and
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


def test_a_device_s_fastest_run_of_anything_bounds_what_it_can_gain() -> None:
    # Nothing ever ran faster than 2 ms there: a 1 ms task has nothing to gain.
    assert first_look("gpu", 2e-3, 1e-3)[1] == 0.0
    assert first_look("cpu", 2e-3, 1e-3) == (1.0, 0.0)
    # Unknown: the kind's figures; a first run at least its floor, in current runs.
    assert first_look("gpu", None, 15e-3) == (GPU.cost, GPU.gain)
    cost, gain = first_look("cpu", None, 0.1e-3)
    assert cost == SAME_CORES.first_run_s / 0.1e-3 - 1 and gain == SAME_CORES.gain
    # Learned from another task: a device that ran a kernel in 0.1 ms bounds a 0.2 ms
    # task's gain at a half.
    adv = Advisor(["cpu", "acc"])
    _drive(adv, per_item({"cpu": 1e-8, "acc": 1e-9}), [100_000] * 40)  # task "t"
    floor = fastest_run(adv.models.values(), "acc")
    assert floor is not None and abs(floor - 1e-4) < 1e-9
    assert first_look("cpu", floor, 0.2e-3) == (SAME_CORES.first_run_s / 0.2e-3 - 1, 0.5)
    assert fastest_run(adv.models.values(), "gpu-never-ran") is None
