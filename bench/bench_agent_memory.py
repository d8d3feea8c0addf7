"""The agent's memory (RSS) as users come and go, against its own idle figure in the same
run (root; real users made with useradd, removed at the end): idle; after one user's
first session (one uprobe and a profile) has closed, the imports it brought staying
("warm"); with 8 users each holding a session of 4 uprobe specs and a 99 Hz profile of
their own program; and after all of them closed. Each session does one snapshot.

Beside the agent: its root children's RSS and PSS (the spare workers, exec'd ahead and
waiting to be told whose they are), the users' workers' PSS, and all of it together,
against the agent before (REV, no spares) in the same run: what the node holds for the
agent in all.

    sudo .venv/bin/python -m bench.bench_agent_memory [--users 8] [--json] [--before REV]
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from pathlib import Path

from adaptyst_top.runtime.remote.client import AgentConnection
from bench import common
from bench.bench_agent_privsep import SPECS, agent, agent_bench, as_user, rss_mib, target_of
from tests.support.proc_tree import parents_and_uids
from tests.support.workload import build

BEFORE = ""  # a revision whose C and BPF sources are this tree's (e3ca79b until 5f2c09e)


def session(sock: Path, uid: int, work: Path, pid: int, hold: Path | None) -> None:
    """UID's session (4 uprobe specs and a profile of PID), one snapshot, held until the
    file HOLD exists (None: closed at once; the client is a forked process of UID's)."""

    def client() -> int:
        c = AgentConnection(str(sock))
        c.open(pid, [f"uprobe:{work}:{f}" for f in SPECS], 0.02, False, 1000, profile_hz=99)
        c.snapshot(with_hist=True)
        if hold is not None:
            while not hold.exists():
                time.sleep(0.2)
        c.close()
        return 0

    as_user(uid, client)


def anon_mib(pid: int) -> float:
    """The part of RSS that is the process's own (heap, stacks), not files' pages."""
    return common.proc_mib(f"/proc/{pid}/smaps_rollup", "Anonymous")


def pss_mib(pid: int) -> float:
    try:
        return common.proc_mib(f"/proc/{pid}/smaps_rollup", "Pss")
    except OSError:
        return 0.0  # ended meanwhile


def child_rss_mib(pid: int) -> float:
    try:
        return rss_mib(pid)
    except OSError:
        return 0.0  # ended meanwhile


def descendants(pid: int) -> dict[int, int]:
    """PID's child processes and theirs: pid -> real uid."""
    procs = parents_and_uids()
    found: dict[int, int] = {}
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, (up, _) in procs.items() if up == p]
        found.update({c: procs[c][1] for c in kids})
        frontier.extend(kids)
    return found


def around(pid: int, phase: str, res: dict[str, object]) -> None:
    """The agent's own figures at PHASE, its root children's (the spares), and its users' workers' PSS."""
    res[f"rss_mib_{phase}"] = rss_mib(pid)
    res[f"anon_mib_{phase}"] = anon_mib(pid)
    kids = descendants(pid)
    roots = [k for k, u in kids.items() if u == 0]
    res[f"root_children_rss_mib_{phase}"] = sum(child_rss_mib(k) for k in roots)
    res[f"root_children_pss_mib_{phase}"] = sum(pss_mib(k) for k in roots)
    res[f"workers_pss_mib_{phase}"] = sum(pss_mib(k) for k, u in kids.items() if u != 0)
    res[f"all_pss_mib_{phase}"] = pss_mib(pid) + sum(pss_mib(k) for k in kids)


def measure(
    folder: Path, source: Path | None, uids: list[int], work: Path, pids: list[int]
) -> dict[str, object]:
    res: dict[str, object] = {}
    with agent(folder, source) as (sock, pid):
        time.sleep(3.0)  # its preload (a thread) done
        around(pid, "idle", res)
        session(sock, uids[0], work, pids[0], None)
        time.sleep(5.0)  # the agent frees a closed session's parts off its threads
        around(pid, "warm", res)
        hold = folder / f"done-{uuid.uuid4().hex[:6]}"
        held = [
            threading.Thread(target=session, args=(sock, u, work, p, hold))
            for u, p in zip(uids, pids, strict=True)
        ]
        for h in held:
            h.start()
        time.sleep(10)  # every session open and sampling
        around(pid, "loaded", res)
        hold.touch()
        for h in held:
            h.join()
        time.sleep(5.0)
        around(pid, "after", res)
    idle, warm = float(res["rss_mib_idle"]), float(res["rss_mib_warm"])  # type: ignore[arg-type]
    after = float(res["rss_mib_after"])  # type: ignore[arg-type]
    res["after_vs_idle_ratio"] = after / idle
    res["after_vs_warm_ratio"] = after / warm
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--before", default=BEFORE, help=f"the agent before ({BEFORE}; '' none)")
    args = ap.parse_args()
    common.header(args.json)
    res: dict[str, object] = {}
    with agent_bench("bam", args.users, args.before) as (folder, old, uids):
        if old is not None:
            res["before_rev"] = args.before
        work = build(folder)
        work.chmod(0o755)
        targets = [target_of(u, work) for u in uids]
        try:
            pids = [t.pid for t in targets]
            res["now"] = measure(folder, None, uids, work, pids)
            if old is not None:
                res["before"] = measure(folder, old, uids, work, pids)
        finally:
            for p in targets:
                p.kill()
                p.wait()
    common.footer(res, args.json, width=24)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
