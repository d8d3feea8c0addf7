"""The agent's memory (RSS) as users come and go, against its own idle figure in the same
run (root; real users made with useradd, removed at the end): idle; after one user's
first session (one uprobe and a profile) has closed, the imports it brought staying
("warm"); with 8 users each holding a session of 4 uprobe specs and a 99 Hz profile of
their own program; and after all of them closed. Each session does one snapshot.

    sudo .venv/bin/python -m bench.bench_agent_memory [--users 8] [--json]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from adaptyst_top.runtime.agent_client import AgentConnection
from bench import common
from bench.bench_agent_privsep import SPECS, agent, as_user, rss_mib, target_of
from tests.support.workload import build


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


def settle(pid: int, seconds: float = 5.0) -> float:
    time.sleep(seconds)  # the agent frees a closed session's parts off its threads
    return rss_mib(pid)


def anon_mib(pid: int) -> float:
    """The part of RSS that is the process's own (heap, stacks), not files' pages."""
    return common.proc_mib(f"/proc/{pid}/smaps_rollup", "Anonymous")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    folder = Path(tempfile.mkdtemp(prefix="bench-agent-mem-"))
    folder.chmod(0o755)
    tag = uuid.uuid4().hex[:5]
    names = [f"bam{i}-{tag}" for i in range(args.users)]
    res: dict[str, object] = {}
    try:
        for n in names:
            subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", n], check=True)
        uids = [int(subprocess.check_output(["id", "-u", n])) for n in names]
        work = build(folder)
        work.chmod(0o755)
        targets = [target_of(u, work) for u in uids]
        try:
            with agent(folder, None) as (sock, pid):
                res["rss_mib_idle"] = settle(pid, 3.0)  # its preload (a thread) done
                res["anon_mib_idle"] = anon_mib(pid)
                session(sock, uids[0], work, targets[0].pid, None)
                res["rss_mib_warm"] = settle(pid)
                res["anon_mib_warm"] = anon_mib(pid)
                hold = folder / "done"
                held = [
                    threading.Thread(target=session, args=(sock, u, work, p.pid, hold))
                    for u, p in zip(uids, targets, strict=True)
                ]
                for h in held:
                    h.start()
                time.sleep(10)  # every session open and sampling
                res["rss_mib_loaded"] = rss_mib(pid)
                res["anon_mib_loaded"] = anon_mib(pid)
                hold.touch()
                for h in held:
                    h.join()
                res["rss_mib_after"] = settle(pid)
                res["anon_mib_after"] = anon_mib(pid)
        finally:
            for p in targets:
                p.kill()
                p.wait()
    finally:
        for n in names:
            subprocess.run(["userdel", n], check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    idle, warm = float(res["rss_mib_idle"]), float(res["rss_mib_warm"])  # type: ignore[arg-type]
    after = float(res["rss_mib_after"])  # type: ignore[arg-type]
    res["after_vs_idle_ratio"] = after / idle
    res["after_vs_warm_ratio"] = after / warm
    common.footer(res, args.json, width=24)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
