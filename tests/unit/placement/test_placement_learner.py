"""The learner (placement/learner.py): one regression over sizes per device, Thompson
sampling, Page-Hinkley on its residuals; and the simulator that measures it
(experiments/placement/placement_sim.py), run as a user runs it."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from typing import Any

import pytest

from adaptyst_top.placement.cost_model import PRIOR_LEVEL_SD, CostModel
from adaptyst_top.placement.learner import EXPLORE_FIRST, EXPLORE_SHARE, Learner
from tests.support.paths import REPO


def cpu(n: int) -> float:
    return 1e-5 + n * 1e-8


def gpu(n: int) -> float:
    return 5e-4 + n * 1e-9  # the crossover at 55,555 items


def run_json(module: str) -> dict[str, Any]:
    """MODULE run as a user runs it, on 8 report cases: its JSON."""
    out = subprocess.run(
        [sys.executable, "-m", module, "--cases", "8", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout))


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
    assert moved_after <= 10  # a cost that stays moved: within a settle window
    for _ in range(10):
        m.observe(4096, math.log(3e-3))
    assert abs(m.predict(4096)[0] - math.log(3e-3)) < 0.1


def test_every_device_is_looked_at_until_a_warm_run_is_learnt() -> None:
    """A device's first run is cold (PoCL's first SpMV: 141 ms, then 22): it teaches
    nothing, and the device is run again before the next one is looked at."""
    learner = Learner(["cpu", "gpu", "fpga"], seed=5)
    seen = []
    for _ in range(6):
        device = learner.choose("t", 1000)
        seen.append(device)
        cold = 6.0 if (("t", device) not in learner.warm) else 1.0
        learner.observe("t", device, 1000, cold * (cpu if device == "cpu" else gpu)(1000))
    assert seen == ["cpu", "cpu", "gpu", "gpu", "fpga", "fpga"]
    est = learner.estimate("t", "gpu", 1000)
    assert est is not None and abs(est.time_s / gpu(1000) - 1) < 0.01  # the cold run is not in it


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


def test_a_hiccup_neither_says_the_cost_moved_nor_moves_the_model() -> None:
    """A 0.13 ms SpMV read 2.07 ms once in placement_eval: one call, not a new cost."""
    m = CostModel(level=math.log(1.3e-4))
    rng = random.Random(4)
    for _ in range(40):
        m.observe(5000, math.log(1.3e-4 * math.exp(rng.gauss(0, 0.03))))
    before = m.predict(5000)[0]
    assert not m.observe(5000, math.log(2.07e-3))
    assert not m.observe(5000, math.log(1.96e-4))
    assert abs(m.predict(5000)[0] - before) < 0.1


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
    report = run_json("experiments.placement.placement_sim")
    assert report["seeds"] == [1000, 1008] and report["calls"] > 8 * 100
    table = report["policies"]
    assert {"static CPU", "best static", "advisor", "learner", "UCB1", "Thompson"} <= set(table)
    assert table["oracle + one look"]["all"]["optimal"] >= 0.95  # the floor: looks, then best
    # A floor that pays a warm look too, and one a class, is higher.
    floors = ("oracle + one look", "oracle + one look warm", "oracle + one look warm a class")
    regrets = [table[f]["all"]["regret"] for f in floors]
    assert regrets == sorted(regrets), regrets
    for name, entry in table.items():
        for family, row in entry.items():
            assert row["regret"] >= 0, (name, family)  # nothing beats the oracle
            assert 0 <= row["optimal"] <= 1 and row["settle_p95"] >= 0
            # What 10 calls can tell apart in the noise is at least 2%: settled sooner.
            assert 0 <= row["settle_p95_resolvable"] <= row["settle_p95"], (name, family)
    assert table["best static"]["all"]["regret"] <= table["static CPU"]["all"]["regret"]
    assert report["advisor_calls_per_s"] > 0 and report["learner_calls_per_s"] > 0


def test_a_round_placed_before_anything_ran_looks_once_per_class_elsewhere() -> None:
    """Nothing known: every other device takes one call of each class (octave of size),
    the cheapest first (its cold run); the first device keeps the rest."""
    learner = Learner(["cpu", "gpu"], seed=1)
    assert learner.place_round("t", [100, 200, 300]) == ["gpu", "gpu", "cpu"]
    assert Learner(["cpu", "gpu"]).place_round("t", [100]) == ["cpu"]


def test_a_device_looks_where_it_may_win_not_at_the_rounds_smallest_call() -> None:
    """Issue 75's round: the GPU's floor is above what the small class costs on the CPU,
    so a look there teaches nothing; it looks with the large class, where it wins 20x
    (the large calls once stayed on the CPU for good: 9.9x the oracle's time)."""
    small, large = 1 << 10, 1 << 22
    learner = Learner(["cpu", "gpu"], seed=5, floors_s={"gpu": 5e-4})
    for _ in range(3):
        learner.observe("t", "cpu", small, cpu(small))
        learner.observe("t", "cpu", large, cpu(large))
    placed = learner.place_round("t", [small, large, small, large, small])
    assert [placed[i] for i in (0, 2, 4)] == ["cpu"] * 3
    assert placed[1] == placed[3] == "gpu"  # its cold run and a warm one, both large
    for _ in (1, 3):
        learner.observe("t", "gpu", large, cpu(large) / 20)
    later = learner.place_round("t", [small, large, small, large, small])
    assert [later[i] for i in (1, 3)] == ["gpu", "gpu"] and later[0] == "cpu"


def test_the_mixed_classes_simulator_places_near_the_floor() -> None:
    report = run_json("experiments.placement.placement_classes")
    over = report["over_floor"]
    assert over["floor: oracle + one look per class"] == 1.0
    assert over["learner, rounds"] < over["static CPU"]


def test_a_round_looks_at_a_device_never_run_with_its_smallest_call() -> None:
    learner = Learner(["cpu", "gpu"], seed=1)
    for _ in range(2):  # cold, then warm
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
    table = run_json("experiments.placement.placement_rounds")["over_oracle"]
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


def test_a_device_whose_floor_is_above_the_cost_is_never_looked_at() -> None:
    """A 30 us GEMM on the CPU; PoCL says no run there takes under 0.1 ms: no look, no
    draw below its floor. A 40 ms one: looked at."""
    for objective in ("time", "energy"):
        for cpu_s, looked in ((30e-6, False), (40e-3, True)):
            learner = Learner(
                ["cpu", "opencl"],
                objective=objective,  # type: ignore[arg-type]
                seed=3,
                floors_s={"opencl": 1e-4},
            )
            seen = set()
            for _ in range(200):
                device = learner.choose("gemm", 128)
                seen.add(device)
                t = cpu_s if device == "cpu" else 2e-3
                learner.observe("gemm", device, 128, t, t * 60)
            assert ("opencl" in seen) is looked, (objective, cpu_s, seen)


def test_a_round_puts_its_looks_on_a_device_never_run_not_more() -> None:
    """Never run: two calls, its cold run and a warm one; while they are out, none (one
    call at a time, as client.submit in a loop, sends no more there); after a failure
    there, one."""
    learner = Learner(["cpu", "gpu"], seed=8)
    for _ in range(3):
        learner.observe("t", "cpu", 1 << 20, cpu(1 << 20))
    looks: list[bool] = []
    placed = learner.place_round("t", [1 << 20] * 16, looks=looks)
    assert placed.count("gpu") == 2 and looks == [d == "gpu" for d in placed]
    singles = [learner.place_round("t", [1 << 20])[0] for _ in range(10)]
    assert "gpu" not in singles
    learner.failed("t", "gpu")
    learner.back("t", "gpu")  # the other look: cancelled
    assert learner.place_round("t", [1 << 20] * 16).count("gpu") == 1


def test_a_device_without_joules_yet_is_looked_at_again_under_energy() -> None:
    """A meter's first window gives no joules: the CPU's runs came back without, the
    accelerator's with. The CPU is not judged by time alone (which would leave it for
    good): it is run again, its joules come, and it wins on energy."""
    learner = Learner(["cpu", "acc"], objective="energy", seed=6)
    watts = {"cpu": 10.0, "acc": 300.0}
    t = {"cpu": 4e-2, "acc": 4e-3}  # 10x slower, 30x less power
    for i in range(200):
        device = learner.choose("t", 1000)
        e = t[device] * watts[device] if (device != "cpu" or i > 20) else None
        learner.observe("t", device, 1000, t[device], e)
    assert learner.best("t", 1000) == "cpu"


def test_hostile_figures_keep_every_prediction_a_finite_float() -> None:
    """Sizes and times at the ends of what a Dask client may send: nothing overflows,
    nothing learnt goes NaN."""
    learner = Learner(["cpu", "gpu"], objective="weighted", seed=1)
    rng = random.Random(5)
    for _ in range(300):
        n = rng.choice([1, 2, 1 << 10, (1 << 10) + 1, 1 << 62])
        device = learner.choose("t", n)
        t = rng.choice([1e-9, 86_400.0, 1e-300, math.inf, math.nan, 3e-3])
        learner.observe("t", device, n, t, rng.choice([None, 1e12, 1e-12, math.nan, 1.0]))
        learner.place_round("t", [n, 1, 1 << 62])
    for d in ("cpu", "gpu"):
        for n in (1, 1 << 62):
            est = learner.estimate("t", d, n)
            assert est is not None and math.isfinite(est.time_s) and est.time_s > 0


def test_a_run_back_clears_a_failure_and_lets_the_next_round_pair_again() -> None:
    learner = Learner(["cpu", "gpu"], seed=2)
    for _ in range(3):
        learner.observe("t", "cpu", 4096, cpu(4096))
    learner.failed("t", "gpu")
    learner.observe("t", "gpu", 4096, gpu(4096))  # the device works again: a cold run
    assert ("t", "gpu") not in learner.failures and not learner.looking


def test_kept_models_predict_what_they_did_and_damaged_ones_are_refused() -> None:
    import copy

    from adaptyst_top.placement.learner_json import learner_from_json, learner_to_json

    learner = Learner(["cpu", "gpu"], objective="energy", seed=4)
    rng = random.Random(4)
    for _ in range(80):
        n = 1 << rng.randrange(8, 20)
        device = learner.choose("t", n)
        t = (cpu if device == "cpu" else gpu)(n)
        learner.observe("t", device, n, t, t * 50)
    kept = json.loads(json.dumps(learner_to_json(learner)))
    again = Learner(["cpu", "gpu"], objective="energy", seed=4)
    assert learner_from_json(kept, again) is None
    for d in ("cpu", "gpu"):
        a, b = learner.estimate("t", d, 5000), again.estimate("t", d, 5000)
        assert a is not None and b is not None and math.isclose(a.time_s, b.time_s)
    assert again.first == {"t": "cpu"} and not again.warm  # every device cold again
    assert learner_from_json(kept, Learner(["cpu"])) is None  # a device gone: left out
    for damage in (
        lambda k: k.update(version=2),
        lambda k: k["models"][0].update(mean=[math.nan] * len(k["models"][0]["mean"])),
        lambda k: k["models"][0].update(cov=[[1.0, 2.0]]),
        lambda k: k["models"][0]["cov"][0].__setitem__(0, -5.0),  # not a covariance
        lambda k: k["models"][0].update(task="x" * 1000),
        lambda k: k["models"][0].update(n=-1),
        lambda k: k.update(models=[{}] * 5000),
    ):
        bad = copy.deepcopy(kept)
        damage(bad)
        fresh = Learner(["cpu", "gpu"])
        why = learner_from_json(bad, fresh)
        assert why is not None and "\n" not in why and fresh.models == {}, why


def test_a_size_never_run_is_guessed_at_the_works_slope_on_the_host_alone() -> None:
    """Learnt at one size only: on the host (the first device) a cost 10 octaves up is
    guessed 2^10 times dearer (work); on an accelerator, 2^5 (a launch, then work)."""
    for first, slope in (("cpu", 1.0), ("gpu", 0.5)):
        learner = Learner(["cpu", "gpu"])
        for _ in range(2):  # its cold call, then a warm one
            learner.observe("t", first, 1 << 8, 1e-4)
        small, large = (learner.predict("t", first, n) for n in (1 << 8, 1 << 18))
        assert small is not None and large is not None
        assert large[0] - small[0] == pytest.approx(slope * 10 * math.log(2), rel=0.05), first
        # The other device starts from that shape, on its own kind's slope.
        other = "gpu" if first == "cpu" else "cpu"
        o_small, o_large = (learner.predict("t", other, n) for n in (1 << 8, 1 << 18))
        assert o_small is not None and o_large is not None
        assert o_large[0] - o_small[0] == pytest.approx(
            (1.5 - slope) * 10 * math.log(2), rel=0.05
        ), other
