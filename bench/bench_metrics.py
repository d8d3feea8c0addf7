"""What a scrape of the agent costs: time to answer GET /metrics and its size, with 0 to
200 probe label sets (each a calls counter and a latency histogram whose calls span
half an octave: the boundaries they occupy are exported), against
Debian's node_exporter (its default collectors) scraped the same way in the same run.
Series counted as the sample lines of the text format.

    .venv/bin/python -m bench.bench_metrics [--json]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import time
import urllib.request

from adaptyst_top.agent.exporter import collector as metrics
from adaptyst_top.agent.exporter import export as metrics_export
from adaptyst_top.snapshot import Latency, ProbeEntry
from adaptyst_top.snapshot.histogram import bucket_of
from bench import common

REPS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> tuple[float, int, int]:
    """(median ms, bytes, sample lines) of REPS scrapes."""
    times, body = [], b""
    for _ in range(REPS):
        t = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read()
        times.append(time.perf_counter() - t)
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return statistics.median(times) * 1e3, len(body), samples


def probes(n: int) -> list[metrics.ProbeSource]:
    rows = []
    for i in range(n):
        ns = 1000 * (i + 1)
        lat = Latency(*(float(ns),) * 6)
        hist = tuple((bucket_of(ns * k // 4), 10) for k in range(2, 8))
        rows.append(
            ProbeEntry(
                group=1, id=i, spec="uprobe:/opt/app:*", name=f"fn_{i}", kind="uprobe", state="attached",
                count=60, rate_hz=float(i), latency=lat, raw=lat, hist=hist,
            )
        )  # fmt: skip
    return [metrics.ProbeSource("alice", "42", rows, 0.001)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    common.header(args.json)
    res: dict[str, float] = {}
    devices = metrics_export.node_devices()
    for n in (0, 10, 50, 200):
        sources = probes(n)
        collector = metrics.AgentCollector(devices, sources.copy, "all", max_series=1000)
        listen = f"127.0.0.1:{free_port()}"
        stop = metrics_export.serve(metrics_export.registry_for(collector), listen)
        ms, size, samples = scrape(f"http://{listen}/metrics")
        stop()
        res[f"agent_{n}_probes_ms"], res[f"agent_{n}_probes_kib"] = ms, size / 1024
        res[f"agent_{n}_probes_series"] = samples
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exe:
        port = free_port()
        proc = subprocess.Popen(
            [exe, f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            ms, size, samples = scrape(f"http://127.0.0.1:{port}/metrics")
            res["node_exporter_ms"], res["node_exporter_kib"] = ms, size / 1024
            res["node_exporter_series"] = samples
        finally:
            proc.terminate()
            proc.wait()
    common.footer(res, args.json, spec="10.1f", indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
