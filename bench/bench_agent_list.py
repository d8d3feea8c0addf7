"""Root's CPU for a user's `list` of her own large file through the agent: the agent of
this tree (the user's parser describes the file) beside the agent before that change
(root named, globbed and entry-checked every function), in the same run, on one file of
N one-instruction functions; the agent's own CPU (user + system, not its workers') and
the client's wall time, for every function (`*`) and for a narrow pattern.

    sudo .venv/bin/python -m bench.bench_agent_list [--functions 200000] [--json]
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psutil

from adaptyst_top.runtime.agent_client import AgentConnection
from bench import common
from bench.bench_agent_privsep import agent, as_user
from tests.support.paths import REPO
from tests.support.programs import build_many_functions

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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--functions", type=int, default=200_000)
    p.add_argument("--before", default=BEFORE)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    common.header(args.json)
    folder = Path(tempfile.mkdtemp(prefix="bench-list-"))
    folder.chmod(0o755)
    old = folder / "before"
    name = f"bls-{uuid.uuid4().hex[:5]}"
    res: dict[str, object] = {"functions": args.functions, "before_rev": args.before}
    try:
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(old),
                        args.before], check=True)  # fmt: skip
        for so in (REPO / "src/adaptyst_top").rglob("_*.so"):
            shutil.copy(so, old / so.relative_to(REPO))
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True)
        uid = pwd.getpwnam(name).pw_uid
        lib = build_many_functions(folder, args.functions)
        lib.chmod(0o755)
        for label, source in (("before", old), ("now", None)):
            with agent(folder, source) as (sock, agent_pid):
                for pattern in ("*", "f1234*"):
                    res[f"{label} {pattern}"] = one_list(sock, uid, agent_pid, lib, pattern)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)],
                       check=False, capture_output=True)  # fmt: skip
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    common.footer(res, args.json, width=20, spec="")
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    raise SystemExit(main())
