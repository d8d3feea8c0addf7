"""What a job's view from a login node costs there, per node: the login node's CPU per node
per second (the monitor and its ssh processes together) and the bytes each node's link
carries per interval, at 1, 2 and 4 nodes; against `record --host NODE` (one node's agent
through one ssh, today's way) in the same run. At 4 nodes, also through relays
(`--fanout 2`: two relays of two nodes): the login node's CPU and bytes then, and what
each relay (and its ssh children) costs the node it runs on.

Nodes are namespaces on this machine (tests/support/nodes.py): each its own sshd, agent
and slurmd. A job of one task per node runs the test workload (fast_fn about 100,000 times
a second, probed). Root: it makes the nodes, the user and the job.

    .venv/bin/python -m bench.bench_job_fanout [--seconds S] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from adaptyst_top.cli.main import main as cli_main
from tests.support.agent_unit import User, useradd, with_the_units_capabilities
from tests.support.as_user import become
from tests.support.nodes import Nodes
from tests.support.workload import build

INTERVAL_S = 1.0
SIZES = (1, 2, 4)


def _ssh_bytes(record_pid: int) -> dict[int, int]:
    """Bytes each of RECORD_PID's ssh processes has read (its TCP link's, encrypted, and
    the few the monitor wrote to it), by its pid."""
    found = {}
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or (d / "comm").read_text().strip() != "ssh":
                continue
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != record_pid:
                continue
            io = dict(line.split(": ") for line in (d / "io").read_text().splitlines())
            found[int(d.name)] = int(io["rchar"])
        except (OSError, ValueError, KeyError):
            continue
    return found


def _relay_cpu(user: User) -> dict[int, float]:
    """CPU seconds so far of USER's relays (`bridge --job ID --nodes`) and of their ssh
    children, by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, bool, float]] = {}
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or d.stat().st_uid != user.uid:
                continue
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (d / "cmdline").read_bytes().split(b"\0")
            relay = b"adaptyst_top.cli.start" in argv and b"--nodes" in argv
            procs[int(d.name)] = (int(fields[1]), relay, (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, ValueError, IndexError):
            continue
    relays = {pid for pid, (_, relay, _) in procs.items() if relay}
    return {pid: cpu for pid, (ppid, _, cpu) in procs.items() if pid in relays or ppid in relays}


def measure(nodes: Nodes, user: User, args: list[str], seconds: float) -> dict[str, float]:
    """`record ARGS` as USER from the login node for SECONDS: its CPU (its ssh children's
    with it), what its ssh links read, and what relays on the nodes spent."""
    env = nodes.login_env(user)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            become(user.uid, user.gid)
            os.environ.update(env)
            os.chdir("/")
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            code = cli_main(
                [
                    "record",
                    *args,
                    "--interval",
                    str(INTERVAL_S),
                    "--duration",
                    str(seconds),
                    "--out",
                    "-",
                ]
            )
        finally:
            os._exit(code)
    seen: dict[int, int] = {}
    relays: dict[int, float] = {}
    started = time.monotonic()
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        seen.update(_ssh_bytes(pid))
        relays.update(_relay_cpu(user))
        time.sleep(0.2)
    wall = time.monotonic() - started
    assert os.waitstatus_to_exitcode(status) == 0, f"record {args} failed"
    return {
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": wall,
        "bytes": float(sum(seen.values())),
        "links": float(len(seen)),
        "relay_cpu_s": sum(relays.values()),  # to its last reading: a second's missed at most
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    assert os.geteuid() == 0, "root: it makes nodes, a user and a job"
    user = useradd(f"adt-f-{uuid.uuid4().hex[:6]}", "/bin/sh")
    subprocess.run(["usermod", "-p", "*", user.name], check=True)
    nodes = Nodes(max(SIZES), [user], with_the_units_capabilities())
    results: dict[str, Any] = {"seconds": args.seconds, "interval_s": INTERVAL_S}
    try:
        binary = build(nodes.base)
        binary.chmod(0o755)
        spec = f"uprobe:{binary}:fast_fn"
        for n in SIZES:
            script = nodes.base / f"job{n}.sh"
            script.write_text(f"#!/bin/sh\nsrun {binary} forever 200\n")
            script.chmod(0o755)
            assert nodes.slurm is not None
            job = nodes.slurm.sbatch(user.uid, user.gid, script, f"-N{n}", f"-n{n}")
            deadline = time.monotonic() + 60
            while nodes.slurm.state(job) != "RUNNING":
                assert time.monotonic() < deadline, nodes.slurm.logs()
                time.sleep(0.2)
            time.sleep(1.0)
            if n == 1:
                peer = measure(
                    nodes, user, ["--host", "node1", "--job", job, "--probe", spec], args.seconds
                )
                results["host_1"] = peer
            got = measure(nodes, user, ["--job", job, "--probe", spec], args.seconds)
            results[f"fanout_{n}"] = got
            if n == max(SIZES):
                relayed = ["--job", job, "--fanout", "2", "--probe", spec]
                results[f"relayed_{n}"] = measure(nodes, user, relayed, args.seconds)
            subprocess.run(["scancel", job], env=nodes.slurm.env, check=False)
            while nodes.slurm.state(job) in ("RUNNING", "PENDING", "COMPLETING"):
                time.sleep(0.2)
    finally:
        nodes.stop()
        subprocess.run(["userdel", user.name], check=False)
    peer_per_s = results["host_1"]["cpu_s"] / results["host_1"]["wall_s"]
    summary = {}
    for n in SIZES:
        r = results[f"fanout_{n}"]
        per_node_s = r["cpu_s"] / r["wall_s"] / n
        summary[str(n)] = {
            "login_cpu_pct_per_node": round(100 * per_node_s, 2),
            "vs_host_one_node": round(per_node_s / peer_per_s, 2) if peer_per_s else None,
            "bytes_per_node_per_interval": round(r["bytes"] / n / (r["wall_s"] / INTERVAL_S)),
        }
    n = max(SIZES)
    r = results[f"relayed_{n}"]
    summary[f"relayed_{n}"] = {
        "login_cpu_pct_per_node": round(100 * r["cpu_s"] / r["wall_s"] / n, 2),
        "links": r["links"],
        "bytes_per_link_per_interval": round(r["bytes"] / r["links"] / (r["wall_s"] / INTERVAL_S)),
        # Each relay, with its ssh links, on the node it runs on, per node it reaches.
        "relay_cpu_pct_per_node": round(100 * r["relay_cpu_s"] / r["wall_s"] / n, 2),
    }
    results["summary"] = summary
    results["host_1_cpu_pct"] = round(100 * peer_per_s, 2)
    if args.json:
        print(json.dumps(results))
    else:
        print(f"--host one node: {results['host_1_cpu_pct']}% of a core")
        for size, figures in summary.items():
            print(f"{size} nodes: {figures}")


if __name__ == "__main__":
    main()
