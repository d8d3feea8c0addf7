"""A fresh user's first probe through the agent: from her connection (hello) to one
uprobe attached on her own program, on a fresh agent whose start-up work is done (root;
users made with useradd, removed at the end). Against, in the same run: the agent
before (REV, default the commit whose workers were exec'd fresh at her hello), and her
second session on the same agent (her workers kept: the floor). Agents alternate,
ROUNDS of each, USERS fresh users a round, 2 s apart.

    .venv/bin/python -m bench.bench_agent_first_probe [--json] [--before REV]
        [--rounds N] [--users N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from adaptyst_top.runtime.remote.client import AgentConnection
from bench import common
from bench.bench_agent_privsep import agent, agent_bench, as_user, target_of
from tests.support.workload import build

BEFORE = ""  # a revision whose C and BPF sources are this tree's (e3ca79b until 5f2c09e)
SETTLE_S = 3.0  # the agent's preload (spares, calibration) done before users come
APART_S = 2.0


def sessions(sock: Path, uid: int, work: Path, pid: int) -> dict[str, float]:
    """UID's first session and her second: hello to attached (ms)."""

    def client() -> dict[str, float]:
        got = {}
        for label in ("first_ms", "second_ms"):
            t = time.perf_counter()
            conn = AgentConnection(str(sock))
            conn.open(pid, [f"uprobe:{work}:fast_fn"], 0.02, False, 1000)
            got[label] = (time.perf_counter() - t) * 1e3
            conn.close()
        return got

    return as_user(uid, client)  # type: ignore[return-value]


def one_agent(
    folder: Path, source: Path | None, uids: list[int], work: Path
) -> list[dict[str, float]]:
    got = []
    with agent(folder, source) as (sock, _pid):
        time.sleep(SETTLE_S)
        for uid in uids:
            target = target_of(uid, work)
            try:
                time.sleep(APART_S)
                got.append(sessions(sock, uid, work, target.pid))
            finally:
                target.kill()
                target.wait()
    return got


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    firsts = sorted(r["first_ms"] for r in runs)
    seconds = sorted(r["second_ms"] for r in runs)
    return {
        "first_ms_median": statistics.median(firsts),
        "first_ms_min": firsts[0],
        "first_ms_max": firsts[-1],
        "second_ms_median": statistics.median(seconds),
        "n": len(runs),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--before", default=BEFORE, help=f"the agent to compare with ({BEFORE}; '' none)"
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--users", type=int, default=3, help="fresh users per agent and round")
    args = p.parse_args()
    common.header(args.json)
    labels = ["now", "before"] if args.before else ["now"]
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    res: dict[str, object] = {"rounds": args.rounds, "users_per_round": args.users}
    count = args.rounds * len(labels) * args.users
    with agent_bench("bfp", count, args.before) as (folder, old, uids):
        if old is not None:
            res["before_rev"] = args.before
        work = build(folder)
        work.chmod(0o755)
        for r in range(args.rounds):
            order = labels if r % 2 == 0 else labels[::-1]
            for label in order:
                mine, uids = uids[: args.users], uids[args.users :]
                runs[label].extend(
                    one_agent(folder, old if label == "before" else None, mine, work)
                )
        for label in labels:
            res[label] = summary(runs[label])
        if args.before:
            now, before = res["now"], res["before"]
            assert isinstance(now, dict) and isinstance(before, dict)
            res["first_now_to_before"] = now["first_ms_median"] / before["first_ms_median"]
    common.footer(res, args.json, width=20, spec="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
