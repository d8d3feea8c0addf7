"""The learner (placement/learner.py): one regression over sizes per device, Thompson
sampling, Page-Hinkley on its residuals; and the simulator that measures it
(experiments/placement/placement_sim.py), run as a user runs it."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

from adaptyst_top.placement.cost_model import PRIOR_LEVEL_SD, CostModel
from adaptyst_top.placement.learner import EXPLORE_FIRST, EXPLORE_SHARE, Learner
from tests.support.paths import REPO


def cpu(n: int) -> float:
    return 1e-5 + n * 1e-8


def gpu(n: int) -> float:
    return 5e-4 + n * 1e-9  # the crossover at 55,555 items


def test_a_crossover_is_learned_in_a_few_calls_and_kept() -> None:
    rng = random.Random(3)
    learner = Learner(["cpu", "gpu"], seed=3)
    small, large = 1_000, 1_000_000
    last: dict[int, list[str]] = {small: [], large: []}
    for i in range(300):
        n = small if rng.random() < 0.5 else large
        device = learner.choose("t", n)
        cost = (cpu if device == "cpu" else gpu)(n) * math.exp(rng.gauss(0, 0.1))
        learner.observe("t", device, n, cost)
        if i >= 200:
            last[n].append(device)
    assert last[small].count("cpu") >= 0.9 * len(last[small]), last[small]
    assert last[large].count("gpu") >= 0.9 * len(last[large]), last[large]


def test_a_size_never_seen_is_predicted_from_its_neighbours() -> None:
    m = CostModel(level=math.log(cpu(1 << 10)))
    for _ in range(20):
        m.observe(1 << 10, math.log(cpu(1 << 10)))
        m.observe(1 << 14, math.log(cpu(1 << 14)))
    mean, var = m.predict(1 << 12)
    assert math.log(cpu(1 << 10)) < mean < math.log(cpu(1 << 14))
    _, far_var = m.predict(1 << 30)
    assert var < 0.1 < far_var <= PRIOR_LEVEL_SD**2 + 10  # honest: unsure far away


def test_a_device_whose_cost_moves_is_seen_to_move() -> None:
    m = CostModel(level=math.log(1e-3))
    rng = random.Random(1)
    for _ in range(40):
        assert not m.observe(4096, math.log(1e-3 * math.exp(rng.gauss(0, 0.05))))
    moved_after = next(
        i for i in range(20) if m.observe(4096, math.log(3e-3 * math.exp(rng.gauss(0, 0.05))))
    )
    assert moved_after <= 5
    for _ in range(10):
        m.observe(4096, math.log(3e-3))
    assert abs(m.predict(4096)[0] - math.log(3e-3)) < 0.1


def test_every_device_is_looked_at_once_right_after_the_first_call() -> None:
    learner = Learner(["cpu", "gpu", "fpga"], seed=5)
    assert learner.choose("t", 1000) == "cpu"
    learner.observe("t", "cpu", 1000, cpu(1000))
    assert learner.choose("t", 1000) == "gpu"
    learner.observe("t", "gpu", 1000, gpu(1000))
    assert learner.choose("t", 1000) == "fpga"


def test_looks_stop_once_their_predicted_cost_is_over_the_share() -> None:
    """A device 20x dearer at one size, never run at another: a Thompson draw there may
    pick it, and each such look is charged what it is predicted to cost more, in calls
    of the best; past EXPLORE_SHARE of the task's calls the best is kept."""

    def picks(spent: float) -> int:
        learner = Learner(["cpu", "slow"], seed=11)
        for _ in range(30):
            learner.observe("t", "cpu", 1 << 10, cpu(1 << 10))
            learner.observe("t", "slow", 1 << 10, 20 * cpu(1 << 10))
        learner.spent["t"] = spent
        n = 1 << 16  # 6 octaves from anything run: a guess
        return sum(learner.choose("t", n) == "slow" for _ in range(300))

    assert picks(0.0) > 0  # the guess is wide: a look is tempting, and taken
    assert picks(max(EXPLORE_FIRST, EXPLORE_SHARE * 60)) == 0  # the share is spent


def test_the_run_to_run_noise_is_learned_not_assumed() -> None:
    rng = random.Random(2)
    for sigma in (0.02, 0.3):
        m = CostModel(level=math.log(cpu(4096)))
        for _ in range(200):
            m.observe(4096, math.log(cpu(4096)) + rng.gauss(0, sigma))
        assert 0.5 * sigma < math.sqrt(m.noise) < 2 * sigma, (sigma, m.noise)


def test_costs_that_are_no_cost_teach_nothing() -> None:
    learner = Learner(["cpu", "gpu"])
    for bad in (0.0, -1.0, math.nan, math.inf):
        assert learner.observe("t", "gpu", 100, bad) is False
    assert learner.models == {}
    assert learner.choose("t", 100) == "cpu"


def test_the_simulator_reports_every_policy_against_the_oracle() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "experiments.placement.placement_sim", "--cases", "8", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["seeds"] == [1000, 1008] and report["calls"] > 8 * 100
    table = report["policies"]
    assert {"static CPU", "best static", "advisor", "learner", "UCB1", "Thompson"} <= set(table)
    assert table["oracle + one look"]["all"]["optimal"] >= 0.95  # the floor: looks, then best
    for name, entry in table.items():
        for family, row in entry.items():
            assert row["regret"] >= 0, (name, family)  # nothing beats the oracle
            assert 0 <= row["optimal"] <= 1 and row["settle_p95"] >= 0
    assert table["best static"]["all"]["regret"] <= table["static CPU"]["all"]["regret"]
    assert report["advisor_calls_per_s"] > 0 and report["learner_calls_per_s"] > 0


def test_a_round_placed_before_anything_ran_goes_to_the_first_device() -> None:
    learner = Learner(["cpu", "gpu"], seed=1)
    assert learner.place_round("t", [100, 200, 300]) == ["cpu"] * 3


def test_a_round_looks_at_a_device_never_run_with_its_smallest_call() -> None:
    learner = Learner(["cpu", "gpu"], seed=1)
    learner.observe("t", "cpu", 1 << 20, cpu(1 << 20))
    placed = learner.place_round("t", [1 << 22, 1 << 12, 1 << 20, 1 << 21])
    assert placed[1] == "gpu"  # the cheapest look


def test_a_round_is_spread_by_expected_finish_over_devices_alike() -> None:
    """Two devices known to cost the same: a round of 20 goes half to each (dmda),
    where one call at a time would send all 20 to whichever looked cheaper."""
    learner = Learner(["cpu", "cpu2"], seed=4)
    for _ in range(30):
        for d in ("cpu", "cpu2"):
            learner.observe("t", d, 4096, cpu(4096))
    placed = learner.place_round("t", [4096] * 20, ready_s={"cpu": 0.0, "cpu2": 0.0})
    assert 7 <= placed.count("cpu") <= 13, placed
    busy = learner.place_round("t", [4096] * 20, ready_s={"cpu": 1.0, "cpu2": 0.0})
    assert busy.count("cpu2") == 20  # a queue a second long: the other device's turn


def test_the_rounds_simulator_reports_against_the_oracle() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "experiments.placement.placement_rounds", "--cases", "8", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    table = json.loads(out.stdout)["over_oracle"]
    assert table["oracle (dmda, true costs)"]["all"] == 0.0
    assert table["learner, rounds (dmda)"]["all"] < table["static CPU"]["all"]


def test_the_objective_is_scored_from_learnt_time_and_energy() -> None:
    """The GPU is 2x faster at 10x the power: time places it there, energy on the CPU,
    and an even weighted mix (1/2 x 0.5 + 1/2 x 5 = 2.75 of the CPU's) on the CPU."""
    watts = {"cpu": 20.0, "gpu": 200.0}
    speed = {"cpu": 1.0, "gpu": 2.0}
    for objective, expected in (("time", "gpu"), ("energy", "cpu"), ("weighted", "cpu")):
        rng = random.Random(9)
        learner = Learner(["cpu", "gpu"], objective=objective, seed=9)  # type: ignore[arg-type]
        chosen = []
        for _ in range(150):
            device = learner.choose("t", 1 << 16)
            t = cpu(1 << 16) / speed[device] * math.exp(rng.gauss(0, 0.05))
            learner.observe("t", device, 1 << 16, t, t * watts[device])
            chosen.append(device)
        assert chosen[-50:].count(expected) >= 45, (objective, chosen[-50:])
        est = learner.estimate("t", "gpu", 1 << 16)
        assert est is not None and abs(math.log(est.time_s / (cpu(1 << 16) / 2))) < 0.1
        assert (est.energy_j is None) == (objective == "time")


def test_energy_not_measured_places_by_time() -> None:
    learner = Learner(["cpu", "gpu"], objective="energy", seed=2)
    for _ in range(60):
        device = learner.choose("t", 4096)
        learner.observe("t", device, 4096, cpu(4096) / (4 if device == "gpu" else 1), None)
    assert [learner.choose("t", 4096) for _ in range(20)].count("gpu") >= 18
