"""Root's CPU for a user's `list` of her own large file through the agent: the agent of
this tree (the user's parser describes the file) beside the agent before that change
(root named, globbed and entry-checked every function), in the same run, on one file of
N one-instruction functions; the agent's own CPU (user + system, not its workers') and
the client's wall time, for every function (`*`) and for a narrow pattern. Then, on
this tree's agent, another user's first probe and snapshot p95 quiet and while the first
user lists every function again and again (issue 73: within 1.5x quiet), and beside
the peer: the same user's plain busy loop (one core, as the parse takes), so that what
the agent adds is apart from what any process of hers would take of the node.

    sudo .venv/bin/python -m bench.bench_agent_list [--functions 200000] [--before REV|'']
        [--json]
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil

from adaptyst_top.runtime.remote.client import AgentConnection
from bench import common
from bench.bench_agent_privsep import agent, as_user, honest, target_of
from tests.support.paths import REPO
from tests.support.programs import build_many_functions
from tests.support.workload import build

BEFORE = "9744747"  # the last agent whose core described a user's files itself


def own_cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def one_list(sock: Path, uid: int, agent_pid: int, lib: Path, pattern: str) -> dict[str, float]:
    def client() -> dict[str, float]:
        conn = AgentConnection(str(sock))
        started = time.monotonic()
        request = {"pid": None, "binary": str(lib), "pattern": pattern}
        objects, _ = conn.list_objects({**request, "functions": True, "usdt": False, "all": False})
        wall = time.monotonic() - started
        conn.close()
        return {"wall_s": wall, "listed": float(len(objects[0].get("functions") or []))}

    before = own_cpu_s(agent_pid)
    got = as_user(uid, client)
    assert isinstance(got, dict)
    return {**got, "root_cpu_s": own_cpu_s(agent_pid) - before}


def beside(
    sock: Path, agent_pid: int, uid: int, lib: Path, other_uid: int, work: Path
) -> dict[str, float]:
    """OTHER_UID's first probe and snapshot p95, quiet, then while UID lists every
    function of LIB, request after request, then beside UID's busy loop; and root's CPU
    for those lists. The first probe after the quiet one finds the user's workers
    started: its ratios are below 1."""
    target = target_of(other_uid, work)
    try:
        quiet = honest(sock, other_uid, work, target.pid)
        stop = threading.Event()
        lists: list[dict[str, float]] = []

        def lister() -> None:
            while not stop.is_set():
                lists.append(one_list(sock, uid, agent_pid, lib, "*"))

        t = threading.Thread(target=lister)
        t.start()
        try:
            time.sleep(2.0)  # the first list under way
            busy = honest(sock, other_uid, work, target.pid)
        finally:
            stop.set()
            t.join()
        hog = subprocess.Popen(["sh", "-c", "while :; do :; done"], user=uid, group=uid,
                               extra_groups=[])  # fmt: skip
        try:
            time.sleep(2.0)
            peer = honest(sock, other_uid, work, target.pid)
        finally:
            hog.kill()
            hog.wait()
    finally:
        target.kill()
        target.wait()
    return {
        "peer_first_probe_ratio": peer["first_probe_ms"] / quiet["first_probe_ms"],
        "peer_snapshot_p95_ratio": peer["snapshot_p95_ms"] / quiet["snapshot_p95_ms"],
        "quiet_first_probe_ms": quiet["first_probe_ms"],
        "quiet_snapshot_p95_ms": quiet["snapshot_p95_ms"],
        "first_probe_ratio": busy["first_probe_ms"] / quiet["first_probe_ms"],
        "snapshot_p95_ratio": busy["snapshot_p95_ms"] / quiet["snapshot_p95_ms"],
        "lists": float(len(lists)),
        "root_cpu_s_per_list": sum(x["root_cpu_s"] for x in lists) / max(1, len(lists)),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--functions", type=int, default=200_000)
    p.add_argument("--before", default=BEFORE, help="the agent to compare with ('': none)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    common.header(args.json)
    folder = Path(tempfile.mkdtemp(prefix="bench-list-"))
    folder.chmod(0o755)
    old = folder / "before"
    tag = uuid.uuid4().hex[:5]
    name, other = f"bls-{tag}", f"blo-{tag}"
    res: dict[str, object] = {"functions": args.functions, "before_rev": args.before}
    try:
        agents: list[tuple[str, Path | None]] = [("now", None)]
        if args.before:
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach",
                            str(old), args.before], check=True)  # fmt: skip
            for so in (REPO / "src/adaptyst_top").rglob("_*.so"):
                shutil.copy(so, old / so.relative_to(REPO))
            agents.insert(0, ("before", old))
        for n in (name, other):
            subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", n], check=True)
        uid, other_uid = pwd.getpwnam(name).pw_uid, pwd.getpwnam(other).pw_uid
        lib = build_many_functions(folder, args.functions)
        lib.chmod(0o755)
        for label, source in agents:
            with agent(folder, source) as (sock, agent_pid):
                for pattern in ("*", "f1234*"):
                    res[f"{label} {pattern}"] = one_list(sock, uid, agent_pid, lib, pattern)
        work = build(folder)
        work.chmod(0o755)
        with agent(folder, None) as (sock, agent_pid):
            res["beside"] = beside(sock, agent_pid, uid, lib, other_uid, work)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)],
                       check=False, capture_output=True)  # fmt: skip
        for n in (name, other):
            subprocess.run(["userdel", n], check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    common.footer(res, args.json, width=20, spec="")
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    raise SystemExit(main())
