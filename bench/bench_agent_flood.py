"""A user's connect flood against another user's hello (root: the agent and two users'
ids). Two processes of one uid connect and close in a loop; a second uid connects and
says hello again and again while the flood lasts, and the time from its connect to the
agent's answer is taken. Peer: the same hello with no
flood, in the same run. With `--busy N`, N busy loops run beside everything.

    sudo .venv/bin/python -m bench.bench_agent_flood [--seconds 10] [--busy 2] [--json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adaptyst_top.runtime.remote import protocol as proto
from bench import common

CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]
FLOODER_UID, CALLER_UID = 65534, 65533  # nobody, and an id no one uses here


def as_uid(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def flood(path: str, until: float, counter: int) -> None:
    as_uid(FLOODER_UID)
    n = 0
    while time.monotonic() < until:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            n += 1
        except OSError:
            pass
        s.close()
    os.write(counter, f"{n}\n".encode())


def hello_s(path: str) -> float:
    """Connect (again while the queue is full) and say hello: seconds to the answer."""
    start = time.monotonic()
    while True:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(60)
        try:
            s.connect(path)
            break
        except BlockingIOError:
            s.close()
            time.sleep(0.01)
    with s:
        s.sendall(proto.encode("hello"))
        assert b'"hello"' in s.recv(4096)
    return time.monotonic() - start


def hellos(path: str, n: int, until: float = 0.0) -> list[float]:
    """N hellos as CALLER_UID (and more until UNTIL), in a child (its ids dropped), in
    seconds each."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            as_uid(CALLER_UID)
            took = [hello_s(path) for _ in range(n)]
            while time.monotonic() < until:
                took.append(hello_s(path))
            os.write(w, " ".join(f"{t:.6f}" for t in took).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    return [float(x) for x in out.split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the flood runs")
    ap.add_argument("--busy", type=int, default=0, help="busy loops beside it")
    ap.add_argument("--hellos", type=int, default=15, help="hellos with no flood")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    folder = Path(tempfile.mkdtemp(prefix="adt-flood-"))
    folder.chmod(0o755)
    path = str(folder / "agent.sock")
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.busy)]
    agent = subprocess.Popen([*CLI, "agent", "--socket", path], stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(path):
            time.sleep(0.05)
        hellos(path, 3)  # warm
        quiet = hellos(path, args.hellos)
        r, w = os.pipe()
        until = time.monotonic() + args.seconds
        kids = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                try:
                    flood(path, until, w)
                finally:
                    os._exit(0)
            kids.append(pid)
        os.close(w)
        time.sleep(0.5)
        flooded = hellos(path, 1, until - 0.5)  # each one while the flood is on
        for pid in kids:
            os.waitpid(pid, 0)
        with os.fdopen(r) as f:
            connects = sum(int(x) for x in f.read().split())
    finally:
        agent.terminate()
        agent.wait(30)
        for b in busy:
            b.kill()
            b.wait()
        shutil.rmtree(folder, ignore_errors=True)
    res = {
        "busy_loops": args.busy,
        "flood_connects_per_s": connects / args.seconds,
        "hello_quiet_median_ms": statistics.median(quiet) * 1000,
        "hello_flooded_median_ms": statistics.median(flooded) * 1000,
        "hello_flooded_count": len(flooded),
        "hello_flooded_p95_ms": sorted(flooded)[int(0.95 * (len(flooded) - 1))] * 1000,
        "hello_flooded_max_ms": max(flooded) * 1000,
        "hello_flooded_vs_quiet": statistics.median(flooded) / statistics.median(quiet),
    }
    common.footer(res, args.json)


if __name__ == "__main__":
    main()
