"""Rounds of calls submitted at once (Dask's update_graph, a threaded application
through the task API): nothing of a round is back before all of it is placed, and the
devices run their shares side by side, so a round takes as long as its busiest device.
The generated cases of placement_sim (time objective, cold first calls, devices'
floors), cut into rounds; per round, the
makespan of what each policy placed against the same placement made with the true
costs (dmda with an oracle's lengths). Learning between rounds, from every call's time.

    .venv/bin/python -m experiments.placement.placement_rounds [--cases 400] [--seed 1000]
        [--round 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Callable

from adaptyst_top.placement.learner import Learner
from experiments.placement.placement_sim import FAMILIES, REPORT_SEED, Case, generate, geomean

Placer = Callable[[list[int], int], list[str]]


def true_dmda(case: Case, sizes: list[int], start: int) -> list[str]:
    """The longest call first, where it finishes first, with the true expected times."""
    ready = dict.fromkeys(case.devices, 0.0)
    placed = [""] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        d = min(case.devices, key=lambda d: ready[d] + case.expected(d, start + i)[0])
        placed[i] = d
        ready[d] += case.expected(d, start + i)[0]
    return placed


def times(case: Case, start: int, placed: list[str], ran: set[str]) -> list[float]:
    """Each call's expected time; a device's first call in the case pays its cold start
    (placement_sim's Case.cold), the oracle's aside, as in placement_sim."""
    out = []
    for i, d in enumerate(placed):
        t = case.expected(d, start + i)[0]
        if d not in ran:
            ran.add(d)
            t *= case.cold[d]
        out.append(t)
    return out


def makespan(placed: list[str], took: list[float]) -> float:
    busy: dict[str, float] = {}
    for d, t in zip(placed, took, strict=True):
        busy[d] = busy.get(d, 0.0) + t
    return max(busy.values())


def run(case: Case, policy: str, round_len: int) -> float:
    """Total makespan over the case's rounds under POLICY."""
    learner = Learner(list(case.devices), seed=case.seed, floors_s=case.floors)
    r = random.Random(case.seed * 7919 + 1)
    ran: set[str] = set() if policy != POLICIES[0] else set(case.devices)
    total = 0.0
    for start in range(0, len(case.sizes), round_len):
        sizes = case.sizes[start : start + round_len]
        if policy == "oracle (dmda, true costs)":
            placed = true_dmda(case, sizes, start)
        elif policy == "static CPU":
            placed = ["cpu"] * len(sizes)
        elif policy == "learner, each call at submission":
            placed = [learner.choose("task", n) for n in sizes]
        else:
            placed = learner.place_round("task", sizes)
        took = times(case, start, placed, ran)
        total += makespan(placed, took)
        for i, d in enumerate(placed):
            learner.observe("task", d, sizes[i], took[i] * math.exp(r.gauss(0.0, case.noise)))
    return total


POLICIES = (
    "oracle (dmda, true costs)",
    "static CPU",
    "learner, each call at submission",
    "learner, rounds (dmda)",
)


def report(seeds: range, round_len: int) -> dict[str, object]:
    ratios: dict[str, dict[str, list[float]]] = {p: {} for p in POLICIES}
    for seed in seeds:
        case = generate(seed)
        case.objective = "time"
        oracle = run(case, POLICIES[0], round_len)
        for p in POLICIES:
            ratios[p].setdefault(case.family, []).append(run(case, p, round_len) / oracle)
    table = {
        p: {
            f: round(geomean(v) - 1, 4)
            for f, v in [*by.items(), ("all", [x for v in by.values() for x in v])]
        }
        for p, by in ratios.items()
    }
    return {"seeds": [seeds.start, seeds.stop], "round": round_len, "over_oracle": table}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=400)
    p.add_argument("--seed", type=int, default=REPORT_SEED)
    p.add_argument("--round", type=int, default=16)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = report(range(args.seed, args.seed + args.cases), args.round)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"seeds {args.seed}..{args.seed + args.cases - 1}, rounds of {args.round} calls: "
          "makespan over the oracle's (geometric mean)")  # fmt: skip
    families = [*FAMILIES, "all"]
    print(f"{'policy':34}" + "".join(f"{f:>18}" for f in families))
    for name, row in out["over_oracle"].items():  # type: ignore[attr-defined]
        print(f"{name:34}" + "".join(f"{row[f]:>18.1%}" for f in families))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
