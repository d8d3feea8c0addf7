"""The cluster view's data: every node's figures, read back from Prometheus (its HTTP
API, instant queries in PromQL) where the agents' metrics (agent/exporter/collector.py) went.

A few queries cover every node at once (each grouped `by (node)`), so a refresh costs
the same for 2 nodes or 2,000. A node that stopped reporting keeps its row, marked
stale with the time it was last seen (within LOOKBACK), rather than vanishing.
Prometheus renames a scraped `job` label that clashes with its own to `exported_job`:
the Slurm job is read from either.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.runtime import metric_names as mn
from adaptyst_top.snapshot.inert import inert

QUERY_TIMEOUT_S = 5.0  # a whole request, not each read
# 2,000 nodes answer in ~300 kB a query; this is 50x that, and parses in well under 1 GB.
MAX_ANSWER = 16 << 20
# Series read from one answer: 5,000 nodes of four device kinds. Past it the answer is
# cut (and the view says so): 100,000 series took 13 s and 380 MB to read in full.
MAX_SERIES = 20_000
# What a node's figure can be; past it a value is impossible, shown blank and marked.
UTIL_MAX = 1.05  # a ratio, with room for an exporter's rounding
POWER_MAX_W = 100_000.0  # a node of eight 1 kW GPUs draws ~10 kW
LATENCY_MAX_S = 86_400.0
LOOKBACK = "15m"  # how far back a node that stopped reporting is still listed
STALE_AFTER_S = 30.0  # no sample for this long: stale
# A failed scrape makes every series of its node stale at once: a job's node is still
# counted in the job this long after its last sample (it shows stale meanwhile).
JOB_WINDOW = f"{STALE_AFTER_S:.0f}s"
JOB_LABELS = ("exported_job", "job")  # the Slurm job, as Prometheus stored it


class ClusterError(RuntimeError):
    """Prometheus cannot be read; one line."""


@dataclass
class NodeRow:
    node: str
    last_seen: float  # unix time of the node's last sample
    stale: bool = False
    util: dict[str, float] = field(default_factory=dict)  # device kind -> mean 0..1
    power_w: dict[str, float] = field(default_factory=dict)  # device kind -> watts
    energy_w: dict[str, float] = field(default_factory=dict)  # kind -> joules/s (rate)
    jobs: set[str] = field(default_factory=set)
    slowest: tuple[str, float] | None = None  # (probe, p99 seconds)
    # "what:kind" of each figure Prometheus gave that cannot be (shown blank, marked)
    impossible: set[str] = field(default_factory=set)
    # (task, device it runs on now): the task API's, a Dask worker's placed calls
    tasks: set[tuple[str, str]] = field(default_factory=set)


class Prometheus:
    """Instant queries against Prometheus' HTTP API. Each request has a total deadline
    (a server that drips bytes is cut off, not waited for), an answer is at most
    MAX_ANSWER bytes, and a series of the wrong shape is skipped and counted."""

    def __init__(self, url: str, timeout: float = QUERY_TIMEOUT_S) -> None:
        try:
            parsed = urllib.parse.urlparse(url)
            port = parsed.port
        except ValueError as exc:
            raise ClusterError(f"--prometheus {url!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ClusterError(f"--prometheus {url!r}: give http://HOST:PORT")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._https = parsed.scheme == "https"
        self._host, self._port = parsed.hostname, port
        self._base = parsed.path.rstrip("/")
        self._open: set[http.client.HTTPConnection] = set()
        self._lock = threading.Lock()
        self.skipped = 0  # series of the wrong shape, since the caller last reset it
        self.cut = 0  # series past MAX_SERIES left unread, since the caller last reset it
        self.aborted = threading.Event()

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        self._check_aborted()
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = self._get(f"{self._base}/api/v1/query?{urllib.parse.urlencode(params)}")
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            raise ClusterError(f"Prometheus at {self.url}: an answer that is not JSON") from None
        if not isinstance(answer, dict) or answer.get("status") != "success":
            why = answer.get("error") if isinstance(answer, dict) else None
            raise ClusterError(f"Prometheus at {self.url}: {inert(str(why or 'not a success'))}")
        data = answer.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list):
            raise ClusterError(f"Prometheus at {self.url}: an answer without a result list")
        if len(result) > MAX_SERIES:
            self.cut += len(result) - MAX_SERIES
            del result[MAX_SERIES:]
        out = []
        for i, s in enumerate(result):  # label values are any user's text (a job, a function)
            if i % 1000 == 999:
                self._check_aborted()
            if not isinstance(s, dict):
                self.skipped += 1
                continue
            value = s.get("value")
            if not (
                isinstance(s.get("metric"), dict) and isinstance(value, list) and len(value) == 2
            ):
                self.skipped += 1
                continue
            metric = {str(k): inert(str(v)) for k, v in s["metric"].items()}
            out.append({"metric": metric, "value": value})
        return out

    def _get(self, target: str) -> bytes:
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = kind(self._host, self._port, timeout=self.timeout)  # type: ignore[arg-type]
        with self._lock:
            self._open.add(conn)
        late = threading.Event()

        def deadline() -> None:
            late.set()
            _cut(conn)

        timer = threading.Timer(self.timeout, deadline)
        timer.daemon = True
        timer.start()
        try:
            conn.request("GET", target, headers={"Accept": "application/json"})
            response = conn.getresponse()
            if response.status != 200 and response.status not in (400, 422, 503):
                raise ClusterError(
                    f"Prometheus at {self.url}: {response.status} {inert(response.reason)}"
                )
            body = response.read(MAX_ANSWER + 1)
        except (OSError, http.client.HTTPException) as exc:
            if late.is_set():
                raise ClusterError(
                    f"Prometheus at {self.url}: no whole answer within {self.timeout:g} s"
                ) from None
            raise ClusterError(f"Prometheus at {self.url}: {exc}") from None
        finally:
            timer.cancel()
            conn.close()
            with self._lock:
                self._open.discard(conn)
        if len(body) > MAX_ANSWER:
            raise ClusterError(
                f"Prometheus at {self.url}: an answer larger than {MAX_ANSWER >> 20} MB"
            )
        return body

    def abort(self) -> None:
        """Cut every request under way (the view is quitting): they fail at once, and so
        does any query after."""
        self.aborted.set()
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            _cut(conn)

    def _check_aborted(self) -> None:
        if self.aborted.is_set():
            raise ClusterError(f"Prometheus at {self.url}: stopped")


def _cut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _number(sample: dict[str, Any]) -> float | None:
    """The sample's value as a float, NaN and infinities included; None: not a number."""
    try:
        return float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError, OverflowError):
        return None


def _value(sample: dict[str, Any]) -> float | None:
    v = _number(sample)
    return v if v is not None and math.isfinite(v) else None


def _job_of(labels: dict[str, str], scrape_jobs: set[str]) -> str:
    """The Slurm job of a series, or "". A series with no Slurm job carries only the
    scrape's own `job` (its value was empty, so no `exported_job`): that name (e.g.
    `adaptyst`) was shown as the node's job."""
    if exported := labels.get("exported_job"):
        return exported
    job = labels.get("job", "")
    return "" if job in scrape_jobs else job


QUERIES = 8  # that read_cluster makes, for its progress


def read_cluster(
    prom: Prometheus,
    job: str | None = None,
    stale_after: float = STALE_AFTER_S,
    progress: Callable[[int], None] | None = None,
) -> list[NodeRow]:
    """Every node seen within LOOKBACK (only those running JOB, given one), by name.
    PROGRESS(n) is told before the n-th of QUERIES queries (from 1)."""
    now = time.time()
    rows: dict[str, NodeRow] = {}
    asked = 0

    def query(promql: str) -> list[dict[str, Any]]:
        nonlocal asked
        asked += 1
        if progress is not None:
            progress(asked)
        return prom.query(promql)

    # The nodes reporting now (their last sample's time), then those that stopped
    # within LOOKBACK: their series are stale, but a range keeps their last clock.
    # By scrape job too: the node's own series carry no Slurm job, so their `job` is
    # the scrape's name, which is then never taken for a Slurm job.
    live = f"max by (node, job) (timestamp({mn.SCRAPE_DURATION}))"
    past = f"max by (node, job) (last_over_time({mn.TIME}[{LOOKBACK}]))"
    scrape_jobs: set[str] = set()
    for promql in (live, past):
        for s in query(promql):
            node, t = s.get("metric", {}).get("node"), _value(s)
            scrape_jobs.add(s.get("metric", {}).get("job", ""))
            # A clock before 1970 or a day ahead of ours is no node's last sample.
            if node and t is not None and 0 < t < now + 86_400 and node not in rows:
                rows[node] = NodeRow(node, t, stale=now - t > stale_after)
    for s in query(f"avg by (node, kind) ({mn.DEVICE_UTILIZATION})"):
        _put(rows, s, "util", UTIL_MAX)
    for s in query(f"sum by (node, kind) ({mn.DEVICE_POWER})"):
        _put(rows, s, "power_w", POWER_MAX_W)
    for s in query(f"sum by (node, kind) (rate({mn.total(mn.DEVICE_ENERGY)}[1m]))"):
        _put(rows, s, "energy_w", POWER_MAX_W)
    by_job = f"count by (node, {', '.join(JOB_LABELS)})"
    for s in query(f"{by_job} (last_over_time({mn.total(mn.PROBE_CALLS)}[{JOB_WINDOW}]))"):
        labels = s.get("metric", {})
        if labels.get("node") in rows and (j := _job_of(labels, scrape_jobs)):
            rows[labels["node"]].jobs.add(j)
    # Now, not over a window: a task that moved left a series for its old device, which
    # Prometheus marks stale at the next scrape. Only JOB's tasks, given one.
    placed = f"max by (node, task, current, {', '.join(JOB_LABELS)}) ({mn.info(mn.TASK_PLACEMENT)})"
    for s in query(placed):
        labels = s.get("metric", {})
        row = rows.get(labels.get("node", ""))
        task, device = labels.get("task"), labels.get("current")
        if (
            row is not None
            and task
            and device
            and (job is None or _job_of(labels, scrape_jobs) == job)
        ):
            row.tasks.add((inert(task), inert(device)))
    p99 = (
        "histogram_quantile(0.99, sum by (node, probe, le) "
        f"(rate({mn.bucket(mn.PROBE_LATENCY)}[5m])))"
    )
    for s in query(p99):
        labels, v = s.get("metric", {}), _value(s)  # +Inf: past the last bucket, not shown
        row = rows.get(labels.get("node", ""))
        if row is None or v is None:
            continue
        if not 0.0 <= v <= LATENCY_MAX_S:
            row.impossible.add("p99")
        elif row.slowest is None or v > row.slowest[1]:
            row.slowest = (labels.get("probe", "?"), v)
    out = sorted(rows.values(), key=lambda r: r.node)
    return [r for r in out if job in r.jobs] if job else out


def _put(rows: dict[str, NodeRow], sample: dict[str, Any], what: str, most: float) -> None:
    """The sample's figure on its node's row, if it can be (0..MOST); else marked."""
    labels, v = sample.get("metric", {}), _number(sample)
    row = rows.get(labels.get("node", ""))
    if row is None or v is None:
        return
    kind = labels.get("kind", "?")
    if 0.0 <= v <= most:  # False for NaN too
        getattr(row, what)[kind] = v
    else:
        row.impossible.add(f"{what}:{kind}")


def kinds(rows: Sequence[NodeRow]) -> list[str]:
    """The device kinds any node has, CPUs first."""
    found = {k for r in rows for k in r.util} | {k for r in rows for k in r.power_w}
    order = {"cpu": 0, "gpu": 1, "opencl": 2, "fpga": 3}
    return sorted(found, key=lambda k: (order.get(k, 9), k))


__all__ = ["QUERIES", "ClusterError", "NodeRow", "Prometheus", "kinds", "read_cluster"]
