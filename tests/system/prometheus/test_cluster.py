"""The cluster view against a real Prometheus (Debian's) holding 200 node targets, served
by a test exporter that replays the agent's own metrics (agent/exporter/collector.py, this node's
real devices) under 200 node names: every node listed, a job's nodes alone with --job,
the slowest probe by p99, a node that stopped reporting marked stale, not dropped; the
view at 80x24."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import generate_latest

from adaptyst_top.agent.exporter.collector import AgentCollector, ProbeSource
from adaptyst_top.agent.exporter.export import registry_for
from adaptyst_top.placement.loop import TASK_PROBE_NAME
from adaptyst_top.runtime.cluster import Prometheus, read_cluster
from adaptyst_top.snapshot import DeviceReading, Latency, ProbeEntry
from adaptyst_top.snapshot.histogram import bucket_of
from adaptyst_top.tui.cluster_app import node_cells
from tests.support.paths import REPO
from tests.system.prometheus.test_metrics import Prometheus as PrometheusServer
from tests.system.prometheus.test_metrics import free_port

NODES = [f"cn{i:03d}" for i in range(200)]
JOB_NODES = NODES[:5]  # these run Slurm job 100, with a probe each
NO_JOB_NODE = NODES[5]  # a probe of a session in no Slurm job
GONE = NODES[-1]  # stops reporting during the test
PLACED_KEY = "logistic|opencl|20|0"  # a placed task's calls (a Dask worker's) on each

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None and os.geteuid() != 0,
    reason="Debian's prometheus (scripts/setup.sh installs it)",
)


def probe(node_index: int, calls: int, ns: int = 0) -> ProbeEntry:
    """A probe whose calls take (index + 1) x 100 us (or NS): the slowest p99 differs by
    node."""
    ns = ns or (node_index + 1) * 100_000
    lat = Latency(float(ns), float(ns), float(ns), float(ns), float(ns), float(ns))
    return ProbeEntry(
        group=1, id=0, spec="uprobe:/opt/app:solve", name="solve", kind="uprobe",
        state="attached", count=calls, rate_hz=10.0, latency=lat, raw=lat,
        hist=((bucket_of(ns), calls),),
    )  # fmt: skip


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a scrape cut short by Prometheus stopping: nothing to say


class Exporter:
    """/metrics/NODE: the agent's metrics for NODE. The job's nodes are live (counters
    and the CPU's energy advance with time); the others' texts are made once."""

    def __init__(self, devices: list[DeviceReading]) -> None:
        self.start = time.monotonic()
        self.gone: set[str] = set()
        self.devices = devices
        self.live = {
            node: self._collector(node, i) for i, node in enumerate(NODES) if node in JOB_NODES
        }
        self.static = {
            node: self._text(self._collector(node, i)) for i, node in enumerate(NODES)
            if node not in JOB_NODES
        }  # fmt: skip
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                node = self.path.rsplit("/", 1)[-1]
                if node not in NODES or node in exporter.gone:
                    self.send_error(503)
                    return
                body = exporter.metrics(node)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", free_port()), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _now_devices(self) -> list[DeviceReading]:
        """This node's devices, the CPU with a power and an energy counter (RAPL's
        units: this VM has none) so that every panel has data."""
        joules = 100.0 * (1 + time.monotonic() - self.start)
        return [
            replace(d, power_w=100.0, energy_j=joules, energy_source="rapl")
            if d.kind == "cpu"
            else d
            for d in self.devices
        ]

    def _collector(self, node: str, index: int) -> AgentCollector:
        def sources() -> list[ProbeSource]:
            calls = int(1000 * (1 + time.monotonic() - self.start))
            fast = probe(index, calls, ns=50_000)  # never the slowest
            placed = replace(fast, name=TASK_PROBE_NAME, kind="usdt", key=PLACED_KEY)
            return [ProbeSource("alice", "100", [probe(index, calls), placed], 0.001)]

        def no_job() -> list[ProbeSource]:
            calls = int(1000 * (1 + time.monotonic() - self.start))
            return [ProbeSource("alice", None, [probe(index, calls)], 0.001)]

        chosen = sources if node in JOB_NODES else no_job if node == NO_JOB_NODE else list
        export = "all" if node == NO_JOB_NODE else "jobs"  # "jobs" leaves out a jobless one
        collector = AgentCollector(self._now_devices, chosen, export)
        collector.node = node
        return collector

    @staticmethod
    def _text(collector: AgentCollector) -> bytes:
        return bytes(generate_latest(registry_for(collector)))  # with this process's own

    def metrics(self, node: str) -> bytes:
        return self._text(self.live[node]) if node in self.live else self.static[node]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, Exporter]]:
    from adaptyst_top.collectors.devices.sweep import DeviceSweep

    sweep = DeviceSweep(pid=None)
    sweep.read()
    time.sleep(0.2)
    exporter = Exporter(sweep.read())  # this node's real devices
    sweep.close()
    base = tmp_path_factory.mktemp("prom")
    server = PrometheusServer(base, exporter.address, scrape_interval="2s", paths=NODES)
    prom = Prometheus(server.url)
    try:
        server.until(
            lambda: len(prom.query("count by (node) (adaptyst_scrape_duration_seconds)")) == 200,
            "200 nodes scraped",
        )
        yield prom, exporter
    finally:
        server.stop()
        exporter.stop()


def test_every_node_listed_and_a_jobs_nodes_alone(cluster: tuple[Prometheus, Exporter]) -> None:
    prom, _ = cluster
    start = time.monotonic()
    rows = read_cluster(prom)
    print(f"read_cluster over 200 nodes: {1000 * (time.monotonic() - start):.0f} ms")
    assert [r.node for r in rows] == NODES
    assert all(r.util.get("cpu") is not None and not r.stale for r in rows)
    job_rows = read_cluster(prom, job="100")
    assert [r.node for r in job_rows] == JOB_NODES
    assert all(r.jobs == {"100"} for r in job_rows)
    # The job's placed task, on the device it runs on, in each node's row.
    assert all(r.tasks == {("logistic", "opencl")} for r in job_rows), job_rows
    assert not any(r.tasks for r in rows if r.node not in JOB_NODES)
    # A probe in no Slurm job: its series carry only the scrape's `job`, which is no job.
    assert [r.jobs for r in rows if r.node == NO_JOB_NODE] == [set()]
    assert prom.query(f'adaptyst_probe_calls_total{{node="{NO_JOB_NODE}"}}')
    assert node_cells(job_rows[0])[0]["tasks"] == "logistic@opencl"
    # The slowest probe by p99 once two scrapes give a rate: cn004's calls take 500 us.
    deadline = time.monotonic() + 30
    while (slow := read_cluster(prom, job="100")[4].slowest) is None:
        assert time.monotonic() < deadline
        time.sleep(1)
    assert slow[0] == "solve" and abs(slow[1] - 500e-6) <= 0.1 * 500e-6


def test_a_node_that_stops_reporting_stays_marked_stale(
    cluster: tuple[Prometheus, Exporter],
) -> None:
    prom, exporter = cluster
    exporter.gone.add(GONE)
    time.sleep(5)
    rows = {r.node: r for r in read_cluster(prom, stale_after=4.0)}
    assert len(rows) == 200 and rows[GONE].stale
    assert time.time() - rows[GONE].last_seen >= 4.0
    # Every other node was scraped after it went away (on a loaded node a scrape can lag
    # past the staleness bound: what stopped is this one node alone).
    gone_at = rows[GONE].last_seen
    assert all(r.last_seen > gone_at for n, r in rows.items() if n != GONE)


def test_a_jobs_node_that_misses_scrapes_stays_in_the_job_marked_stale(
    cluster: tuple[Prometheus, Exporter],
) -> None:
    """Seen in CI: one failed scrape (a busy exporter) made a job's node vanish from the
    job's view, since the failure marks every series of the node stale at once."""
    prom, exporter = cluster
    node = JOB_NODES[2]
    exporter.gone.add(node)
    try:
        deadline = time.monotonic() + 30
        # A failed scrape: the node's series are stale at once (an instant query has none).
        while prom.query(f'adaptyst_scrape_duration_seconds{{node="{node}"}}'):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        rows = {r.node: r for r in read_cluster(prom, job="100", stale_after=0.5)}
        assert sorted(rows) == JOB_NODES
        assert rows[node].stale and rows[node].jobs == {"100"}
    finally:
        exporter.gone.discard(node)


async def test_the_view_at_80x24(cluster: tuple[Prometheus, Exporter]) -> None:
    from adaptyst_top.tui.cluster_app import ClusterApp

    prom, _ = cluster
    app = ClusterApp(prom, job="100", interval=60)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if len(app.table.rows) == 5:
                break
        assert sorted(app.table.rows) == JOB_NODES
        header = app.query_one("#header").text  # type: ignore[attr-defined]
        assert "5 nodes" in header and "job 100" in header
        await pilot.press("slash", *"cn003", "enter")  # `/` filters, as in the monitor
        await pilot.pause(0.1)
        assert app.table.order == ["cn003"]
        layout = app.table.columns_for(app.table.text_width)
        assert [c.key for c, _ in layout][:2] == ["node", "cpu"]
        assert sum(w for _, w in layout) + len(layout) - 1 <= app.table.text_width


DASHBOARD = REPO / "dashboards" / "adaptyst-top.json"


def test_every_grafana_panel_query_parses_and_returns_data(
    cluster: tuple[Prometheus, Exporter],
) -> None:
    prom, _ = cluster
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    deadline = time.monotonic() + 60  # rate() and increase() need two scrapes in range
    for expr in exprs:
        promql = re.sub(r"\$node\b", ".*", expr)  # the template variable at "All"
        while not prom.query(promql):
            assert time.monotonic() < deadline, f"no data: {promql}"
            time.sleep(1)
