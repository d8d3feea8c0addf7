"""The agent's privilege separation, against the agent before it in the same run (root;
real users made with useradd, removed at the end):

- a user's first `list --binary` through the agent and the median of 10 more: the
  files opened by a fresh per-user opener process, against the thread that took the
  user's ids (the commit before, run from a git worktree of it);
- a user's first probe (open a session with one uprobe, attached), the same two agents;
- the load cases on the agent of this tree: one user opening 14 sessions x 4 specs at
  once, and 7 users x 2 sessions x 4 specs; an honest user's first probe and snapshot
  p95 round trip under them as ratios to quiet figures (goal <= 2x), while their opens
  run ("opening", 0.5 s in) and once their sessions are open and held ("open"): each
  figure the median of REPEAT fresh honest users, quiet ones on the same agent settled,
  and the agent's RSS idle, under load and after the sessions closed.

    .venv/bin/python -m bench.bench_agent_privsep [--json] [--no-load] [--before REV]
        [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from adaptyst_top.runtime.remote.client import AgentConnection
from bench import common
from tests.support.as_user import run_as
from tests.support.paths import REPO
from tests.support.workload import build

CLI = ["-m", "adaptyst_top.cli.start", "agent"]
BEFORE = "3487702^"  # the agent whose thread took a user's ids
SPECS = ("fast_fn", "held_fn", "napped_fn", "nop5_entry")
SETTLE_S = 3.0


def copy_built(old: Path, rev: str) -> None:
    """This tree's C extensions and BPF objects into OLD, a worktree of REV whose C is
    the same (else the before agent would run programs not its own: SystemExit)."""
    same = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", rev, "--", "src/**/*.c",
                           "src/**/*.h"], check=False).returncode == 0  # fmt: skip
    if not same:
        raise SystemExit(f"{rev}'s C or BPF sources differ from this tree's: build its objects")
    for built in [*REPO.glob("src/**/*.so"), *REPO.glob("src/**/*.bpf.o")]:
        shutil.copy(built, old / built.relative_to(REPO))


@contextmanager
def agent_bench(
    prefix: str, count: int, before: str
) -> Iterator[tuple[Path, Path | None, list[int]]]:
    """A bench's folder (0755, removed after), the agent BEFORE (a git worktree of it with
    this tree's built objects; None for ''), and COUNT fresh users (useradd; removed)."""
    folder = Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))
    folder.chmod(0o755)
    old = folder / "before"
    tag = uuid.uuid4().hex[:5]
    names = [f"{prefix}{i}-{tag}" for i in range(count)]
    try:
        if before:
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(old),
                            before], check=True)  # fmt: skip
            copy_built(old, before)
        for n in names:
            subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", n], check=True)
        yield folder, old if before else None, [pwd.getpwnam(n).pw_uid for n in names]
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)],
                       check=False, capture_output=True)  # fmt: skip
        for n in names:
            subprocess.run(["userdel", n], check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def as_user(uid: int, fn: Callable[[], object]) -> object:
    """FN's JSON-able result, run in a forked child that became UID (tests/support/as_user.py)."""
    code, out = run_as(uid, lambda: json.dumps(fn()).encode())
    if code != 0:
        raise RuntimeError(out.decode(errors="replace"))
    return json.loads(out)


@contextmanager
def agent(folder: Path, source: Path | None) -> Iterator[tuple[Path, int]]:
    """An agent of this tree (SOURCE None) or of SOURCE's src/, on a socket in FOLDER."""
    sock = folder / f"agent-{uuid.uuid4().hex[:6]}.sock"
    env = dict(os.environ, PYTHONFAULTHANDLER="1")  # a crash prints every thread's stack
    if source is not None:
        env["PYTHONPATH"] = str(source / "src")
    log = open(folder / f"{sock.stem}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, *CLI, "--socket", str(sock)], env=env, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 60
        while not sock.is_socket():
            assert proc.poll() is None and time.monotonic() < deadline, "the agent did not start"
            time.sleep(0.05)
        time.sleep(0.5)
        yield sock, proc.pid
    finally:
        if proc.poll() is not None:  # it ended under the bench: say how
            print(f"the agent ended ({proc.returncode}):", file=sys.stderr)
            sys.stderr.write((folder / f"{sock.stem}.log").read_text()[-6000:])
        proc.terminate()
        proc.wait(60)
        log.close()


def rss_mib(pid: int) -> float:
    return common.proc_mib(f"/proc/{pid}/status", "VmRSS")


def target_of(uid: int, work: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [str(work)], user=uid, group=uid, extra_groups=[], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def first_figures(sock: Path, uid: int, work: Path, pid: int) -> dict[str, float]:
    """A user's first list and first probe, and the median of 10 more lists (ms)."""

    def client() -> dict[str, float]:
        conn = AgentConnection(str(sock))
        ask = {"binary": str(work), "pid": None, "functions": True, "usdt": False}
        t = time.perf_counter()
        conn.list_objects(ask)
        first = time.perf_counter() - t
        more = []
        for _ in range(10):
            t = time.perf_counter()
            conn.list_objects(ask)
            more.append(time.perf_counter() - t)
        probe = AgentConnection(str(sock))
        t = time.perf_counter()
        probe.open(pid, [f"uprobe:{work}:fast_fn"], 0.02, False, 1000)
        attach = time.perf_counter() - t
        return {
            "first_list_ms": first * 1e3,
            "list_ms_median": statistics.median(more) * 1e3,
            "first_probe_ms": attach * 1e3,
        }

    return as_user(uid, client)  # type: ignore[return-value]


def honest(sock: Path, uid: int, work: Path, pid: int) -> dict[str, float]:
    """The honest user's first probe (ms) and the p95 of 30 snapshot round trips (ms)."""

    def client() -> dict[str, float]:
        conn = AgentConnection(str(sock))
        t = time.perf_counter()
        conn.open(pid, [f"uprobe:{work}:fast_fn"], 0.02, False, 1000)
        first = time.perf_counter() - t
        trips = []
        for _ in range(30):
            t = time.perf_counter()
            conn.snapshot(with_hist=False)
            trips.append(time.perf_counter() - t)
            time.sleep(0.1)
        trips.sort()
        return {"first_probe_ms": first * 1e3, "snapshot_p95_ms": trips[28] * 1e3}

    return as_user(uid, client)  # type: ignore[return-value]


def flood(sock: Path, uid: int, work: Path, pid: int, sessions: int, opened: Path) -> None:
    """UID's SESSIONS sessions of 4 specs each, opened at once, held for 8 s once all are
    open (the file OPENED/UID then says so)."""

    def client() -> int:
        conns: list[AgentConnection] = []

        def one() -> None:
            c = AgentConnection(str(sock))
            c.open(pid, [f"uprobe:{work}:{f}" for f in SPECS], 0.02, False, 1000)
            conns.append(c)

        threads = [threading.Thread(target=one) for _ in range(sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        (opened / str(uid)).touch()
        time.sleep(8)  # held while the honest user measures
        for c in conns:
            c.close()
        return len(conns)

    as_user(uid, client)


def load_case(sock: Path, agent_pid: int, users: list[int], sessions: int, honest_uid: int,
              work: Path, quiet: dict[str, float], when: str) -> dict[str, float]:  # fmt: skip
    """The honest user's figures beside USERS' floods, WHEN "opening" (0.5 s into their
    opens) or "open" (once every flood session is attached and held)."""
    targets = [target_of(u, work) for u in users]
    mine = target_of(honest_uid, work)
    opened = Path(tempfile.mkdtemp(prefix="opened-", dir=work.parent))
    opened.chmod(0o1777)
    try:
        floods = [
            threading.Thread(target=flood, args=(sock, u, work, t.pid, sessions, opened))
            for u, t in zip(users, targets, strict=True)
        ]
        for f in floods:
            f.start()
        if when == "opening":
            time.sleep(0.5)  # their opens are under way
        else:
            deadline = time.monotonic() + 60
            while len(list(opened.iterdir())) < len(users) and time.monotonic() < deadline:
                time.sleep(0.05)
        got = honest(sock, honest_uid, work, mine.pid)
        loaded = rss_mib(agent_pid)
        for f in floods:
            f.join()
        time.sleep(5)
        return {
            "first_probe_ratio": got["first_probe_ms"] / quiet["first_probe_ms"],
            "snapshot_p95_ratio": got["snapshot_p95_ms"] / quiet["snapshot_p95_ms"],
            "first_probe_ms": got["first_probe_ms"],
            "snapshot_p95_ms": got["snapshot_p95_ms"],
            "rss_mib_loaded": loaded,
            "rss_mib_after": rss_mib(agent_pid),
        }
    finally:
        for t in [*targets, mine]:
            t.kill()
            t.wait()
        shutil.rmtree(opened, ignore_errors=True)


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over RUNS, and its range."""
    out: dict[str, float] = {}
    for k in runs[0]:
        values = sorted(r[k] for r in runs)
        out[k] = statistics.median(values)
        if len(values) > 1:
            out[f"{k}_min"], out[f"{k}_max"] = values[0], values[-1]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-load", action="store_true", help="skip the load cases")
    p.add_argument("--repeat", type=int, default=3, help="honest users per figure (medians)")
    p.add_argument(
        "--before",
        default=BEFORE,
        help=f"the agent to compare with (default {BEFORE}; '' for none)",
    )
    args = p.parse_args()
    common.header(args.json)
    res: dict[str, object] = {}
    with agent_bench("bps", 8 + 5 * args.repeat, args.before) as (folder, old, uids):
        if old is not None:
            res["before_rev"] = args.before
        work = build(folder)
        work.chmod(0o755)
        agents = (("thread_before", old), ("opener_now", None)) if old is not None else ()
        for label, source in agents:
            with agent(folder, source) as (sock, _pid):
                target = target_of(uids[0], work)
                try:
                    res[label] = first_figures(sock, uids[0], work, target.pid)
                finally:
                    target.kill()
                    target.wait()
        if args.before:
            before, now = res["thread_before"], res["opener_now"]
            assert isinstance(before, dict) and isinstance(now, dict)
            res["ratios_now_to_before"] = {k: now[k] / before[k] for k in before}
        if not args.no_load:
            honest_uids = uids[8:]
            with agent(folder, None) as (sock, agent_pid):
                time.sleep(SETTLE_S)  # its preload done: a quiet figure, not a start-up one
                idle = rss_mib(agent_pid)
                quiet_runs = []
                for _ in range(args.repeat):
                    uid, honest_uids = honest_uids[0], honest_uids[1:]
                    quiet_target = target_of(uid, work)
                    try:
                        quiet_runs.append(honest(sock, uid, work, quiet_target.pid))
                    finally:
                        quiet_target.kill()
                        quiet_target.wait()
                quiet = medians(quiet_runs)
                res["quiet"] = quiet
                res["rss_mib_idle"] = idle
                for when in ("opening", "open"):
                    for label, flooders, sessions in (("one_user_14x4", uids[:1], 14),
                                                      ("seven_users_2x4", uids[1:8], 2)):  # fmt: skip
                        runs = []
                        for _ in range(args.repeat):
                            uid, honest_uids = honest_uids[0], honest_uids[1:]
                            runs.append(load_case(sock, agent_pid, flooders, sessions, uid,
                                                  work, quiet, when))  # fmt: skip
                        res[f"{label}_{when}"] = medians(runs)
    common.footer(res, args.json, width=20, spec="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
