"""Rounds that mix input classes whose winners differ (issue 75's held-out Dask work):
two devices, a small class the CPU wins by 3-10x and a large one the accelerator wins
by 10-50x, mixed in rounds of ten; the accelerator's first call builds its context
(100-1000x a warm call), as real OpenCL and CUDA code does. Per case, the total of each
round's makespan (devices run their shares side by side) under each policy, over the
floor: the oracle plus one look at each class's losing device, cold start paid.

    PYTHONPATH=. .venv/bin/python -m experiments.placement.placement_classes [--cases 300]
        [--seed 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random

from adaptyst_top.placement.learner import Learner
from experiments.placement.placement_rounds import makespan, true_dmda
from experiments.placement.placement_sim import (
    REPORT_SEED,
    Case,
    Device,
    Dmda,
    PerBucket,
    Thompson,
    Ucb1,
    geomean,
)

ROUND = 10
ROUNDS = (12, 40)  # rounds per case, drawn


def generate(seed: int) -> Case:
    r = random.Random(seed)
    cpu_item = 10 ** r.uniform(-9, -7.5)
    cpu = Device(10 ** r.uniform(-6, -5), cpu_item, 0.0, 100.0)
    small = 2 ** r.uniform(8, 12)
    large = small * 2 ** r.uniform(9, 12)  # a wide gap: the winners differ by 30-500x
    f_small, f_large = r.uniform(3, 10), r.uniform(10, 50)
    t_small, t_large = cpu.time_s(int(small)), cpu.time_s(int(large))
    item = (t_large / f_large - f_small * t_small) / (large - small)
    latency = f_small * t_small - small * item
    acc = Device(latency, item, 0.0, 200.0)
    share = r.uniform(0.2, 0.6)  # of each round's calls, the large class's
    sizes: list[int] = []
    for _ in range(r.randint(*ROUNDS)):
        sizes += [int(large) if r.random() < share else int(small) for _ in range(ROUND)]
    case = Case(seed, "mixed_classes", "time", {"cpu": cpu, "acc": acc}, sizes, [],
                r.uniform(0.03, 0.2))  # fmt: skip
    # The accelerator's first call builds its context and program: 100-1000x a warm
    # (small) call, whatever the call's size (times() adds it).
    case.cold = {"cpu": 0.0, "acc": r.uniform(100, 1000) * acc.time_s(int(small))}
    case.floors = {"acc": latency * r.uniform(0.5, 1.0)}
    return case


def times(case: Case, start: int, placed: list[str], ran: set[str]) -> list[float]:
    """Each call's expected time; a device's first call adds its cold start."""
    out = []
    for i, d in enumerate(placed):
        t = case.expected(d, start + i)[0]
        if d not in ran:
            ran.add(d)
            t += case.cold[d]
        out.append(t)
    return out


def floor_placement(case: Case, sizes: list[int], start: int, looked: set[int]) -> list[str]:
    """The oracle's (dmda, true costs), but each class's first call goes once to the
    device that loses it (the one look any learner must take)."""
    placed = true_dmda(case, sizes, start)
    for i, n in enumerate(sizes):
        if n not in looked:
            looked.add(n)
            costs = {d: case.expected(d, start + i)[0] for d in case.devices}
            placed[i] = max(costs, key=lambda d: costs[d])
    return placed


POLICIES = ("floor: oracle + one look per class", "static CPU", "learner, rounds",
            "UCB1 per size bucket", "Thompson per size bucket", "dmda-like")  # fmt: skip
BANDITS: dict[str, type[PerBucket]] = {
    "UCB1 per size bucket": Ucb1,
    "Thompson per size bucket": Thompson,
    "dmda-like": Dmda,
}


def run(case: Case, policy: str) -> tuple[float, int]:
    """Total makespan under POLICY, and the calls it placed on a class's losing device."""
    learner = Learner(list(case.devices), seed=case.seed, floors_s=case.floors)
    bandit = (
        BANDITS[policy](list(case.devices), random.Random(case.seed)) if policy in BANDITS else None
    )
    r = random.Random(case.seed * 7919 + 1)
    ran: set[str] = set()
    looked: set[int] = set()
    total, losing = 0.0, 0
    for start in range(0, len(case.sizes), ROUND):
        sizes = case.sizes[start : start + ROUND]
        if policy == POLICIES[0]:
            placed = floor_placement(case, sizes, start, looked)
        elif policy == POLICIES[1]:
            placed = ["cpu"] * len(sizes)
        elif bandit is not None:  # each call at submission, what the round taught after
            placed = [bandit.choose(n) for n in sizes]
        else:
            placed = learner.place_round("task", sizes)
        took = times(case, start, placed, ran)
        total += makespan(placed, took)
        for i, d in enumerate(placed):
            best = min(case.devices, key=lambda x: case.expected(x, start + i)[0])
            losing += d != best
            seen = took[i] * math.exp(r.gauss(0.0, case.noise))
            learner.observe("task", d, sizes[i], seen)
            if bandit is not None:
                bandit.ran(d, sizes[i], seen, seen, seen)
    return total, losing


def report(seeds: range) -> dict[str, object]:
    ratios: dict[str, list[float]] = {p: [] for p in POLICIES}
    losing: dict[str, list[int]] = {p: [] for p in POLICIES}
    worst: dict[str, float] = dict.fromkeys(POLICIES, 0.0)
    for seed in seeds:
        case = generate(seed)
        floor = run(case, POLICIES[0])[0]
        for p in POLICIES:
            t, lost = run(case, p)
            ratios[p].append(t / floor)
            losing[p].append(lost)
            worst[p] = max(worst[p], t / floor)
    return {
        "seeds": [seeds.start, seeds.stop],
        "over_floor": {p: round(geomean(v), 3) for p, v in ratios.items()},
        "worst": {p: round(v, 2) for p, v in worst.items()},
        "losing_calls_mean": {p: round(sum(v) / len(v), 1) for p, v in losing.items()},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--seed", type=int, default=REPORT_SEED)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = report(range(args.seed, args.seed + args.cases))
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"seeds {args.seed}..{args.seed + args.cases - 1}, rounds of {ROUND}: total makespan "
          "over the floor (geometric mean; worst case), calls on a class's losing device")  # fmt: skip
    for name in POLICIES:
        print(f"{name:38}{out['over_floor'][name]:>8.3f}x{out['worst'][name]:>8.2f}x"  # type: ignore[index]
              f"{out['losing_calls_mean'][name]:>8.1f}")  # type: ignore[index]  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
