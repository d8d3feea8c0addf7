"""The node agent's costs, each against a peer in the same run (root; builds the test
workload):

- client memory: `record` through the agent against `record` in-process (bcc, LLVM);
- the agent's own CPU at 1 s with 3 clients x ~50 probes, against `top -d 1`;
- one snapshot's round trip for ~200 rows, against the in-process snapshot of the same;
- another process calling a function one client probes in its own process: per-call time
  against no probe at all, and against a node-wide probe of the same function.

    .venv/bin/python -m bench.bench_agent [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from adaptyst_top.runtime.remote.client import AgentConnection
from adaptyst_top.runtime.session import open_session
from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target
from adaptyst_top.snapshot import Snapshot, reusing
from bench import common
from tests.support.workload import build

CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]
TICK = os.sysconf("SC_CLK_TCK")
WIDE = "uprobe:c:str*"  # ~50 functions of libc, in the target only


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss_mib(argv: list[str]) -> float:
    """The peak RSS of a command run to its end (its own, from wait4)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return usage.ru_maxrss / 1024


class Workload:
    def __init__(self, binary: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(binary), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        if not args:
            assert self.proc.stdout is not None
            assert self.proc.stdout.readline().strip() == "ready"

    def timed(self, command: str) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        t = time.perf_counter()
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"
        return time.perf_counter() - t

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def median_ms(fn: Callable[[], object], reps: int = 30) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def per_call_ns(w: Workload, n: int, reps: int = 7) -> float:
    return statistics.median(w.timed(f"fast {n}") for _ in range(reps)) * 1e9 / n


def decode_ms(snapshot: Snapshot) -> dict[str, float]:
    """The client's reading of one snapshot line (orjson.loads, then the decode as the
    client does it, reusing()): its rows as they were the time before (a wide glob's idle
    rows), and every row changed since (two lines in turn, each row's count apart);
    against orjson.loads alone and the decode without reuse."""
    d = snapshot.to_json()
    line = orjson.dumps({"type": "snapshot", "snapshot": d})
    for row in d["probes"]:
        row["count"] += 1
    turn = [line, orjson.dumps({"type": "snapshot", "snapshot": d})]

    def read(text: bytes) -> Snapshot:
        with reusing():
            return Snapshot.from_json(orjson.loads(text)["snapshot"])

    def changed() -> Snapshot:
        turn.reverse()
        return read(turn[0])

    return {
        "read_ms_loads_alone": median_ms(lambda: orjson.loads(line)),
        "read_ms_no_reuse": median_ms(lambda: Snapshot.from_json(orjson.loads(line)["snapshot"])),
        "read_ms_rows_unchanged": median_ms(lambda: read(line)),
        "read_ms_rows_all_changed": median_ms(changed),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    common.header(args.json)
    d = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    d.chmod(0o755)
    binary = build(d)
    sock = d / "agent.sock"
    agent = subprocess.Popen([*CLI, "agent", "--socket", str(sock)], stderr=subprocess.DEVNULL)
    res: dict[str, float] = {}
    try:
        while not sock.is_socket():
            time.sleep(0.05)
        time.sleep(0.3)
        spec = f"uprobe:{binary}:fast_fn"
        target = Workload(binary, "forever", "100")
        rec = ["record", "--pid", str(target.proc.pid), "--probe", spec, "--duration", "3"]
        res["client_rss_mib_agent"] = peak_rss_mib([*CLI, *rec, "--agent", str(sock)])
        res["client_rss_mib_in_process"] = peak_rss_mib([*CLI, *rec])

        # The agent's CPU: 3 clients, ~50 probes each, a snapshot a second, 20 s; top beside.
        conns = [AgentConnection(str(sock)) for _ in range(3)]
        for c in conns:
            c.open(target.proc.pid, [WIDE], 0.02, False, 1000)
        rows = len(conns[0].snapshot(with_hist=False).probes)
        top = subprocess.Popen(["top", "-b", "-d", "1"], stdout=subprocess.DEVNULL)
        a0, t0, w0 = cpu_seconds(agent.pid), cpu_seconds(top.pid), time.monotonic()
        for _ in range(20):
            for c in conns:
                c.snapshot(with_hist=False)
            time.sleep(1.0)
        wall = time.monotonic() - w0
        res[f"agent_cpu_pct_3x{rows}_rows"] = 100 * (cpu_seconds(agent.pid) - a0) / wall
        res["top_cpu_pct"] = 100 * (cpu_seconds(top.pid) - t0) / wall
        top.kill()
        top.wait()
        for c in conns:
            c.close()

        # One snapshot's round trip with ~200 rows, and the same in-process.
        many = [WIDE, "uprobe:c:mem*", "uprobe:c:wcs*", "uprobe:c:*printf*"]
        many += ["uprobe:c:getp*", "uprobe:c:getu*"]
        conn = AgentConnection(str(sock))
        conn.open(target.proc.pid, many, 0.02, False, 1000)
        last = conn.snapshot(with_hist=False)
        rows = len(last.probes)
        res[f"snapshot_ms_agent_{rows}_rows"] = median_ms(lambda: conn.snapshot(with_hist=False))
        conn.close()
        res |= decode_ms(last)
        local = open_session(SessionOptions(Target(pid=target.proc.pid), ProbeSettings(many)))
        res[f"snapshot_ms_in_process_{rows}_rows"] = median_ms(
            lambda: local.snapshot(with_hist=False)
        )
        local.close()
        target.stop()

        # Another process calling what one client probes in its own process.
        mine, other = Workload(binary), Workload(binary)
        n = 20_000_000
        per_call_ns(other, n)  # warm: caches, frequency
        # Alternated, so that a slow spell of the machine falls on both sides.
        plain, probed = [], []
        conn = AgentConnection(str(sock))
        conn.open(mine.proc.pid, [], 0.02, False, 1000)
        for _ in range(5):
            plain.append(per_call_ns(other, n, reps=3))
            conn.add(spec)
            time.sleep(0.3)
            probed.append(per_call_ns(other, n, reps=3))
            snap = conn.snapshot(with_hist=False)
            conn.remove(snap.probes[0].ref)
            time.sleep(0.3)
        conn.close()
        res["other_per_call_ns_no_probe"] = statistics.median(plain)
        res["other_per_call_ns_probe_on_mine"] = statistics.median(probed)
        wide = AgentConnection(str(sock))
        wide.open(None, [spec], 0.02, False, 1000)  # root: node-wide
        res["other_per_call_ns_node_wide_probe"] = per_call_ns(other, n // 100)
        wide.close()
        res["other_ratio_probe_on_mine"] = (
            res["other_per_call_ns_probe_on_mine"] / res["other_per_call_ns_no_probe"]
        )
        res["other_ratio_node_wide"] = (
            res["other_per_call_ns_node_wide_probe"] / res["other_per_call_ns_no_probe"]
        )
        mine.stop()
        other.stop()
    finally:
        agent.terminate()
        agent.wait(60)
    common.footer(res, args.json, width=45, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
