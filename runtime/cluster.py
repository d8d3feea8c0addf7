"""The cluster view's data: every node's figures, read back from Prometheus (its HTTP
API, instant queries in PromQL) where the agents' metrics (runtime/metrics.py) went.

A few queries cover every node at once (each grouped `by (node)`), so a refresh costs
the same for 2 nodes or 2,000. A node that stopped reporting keeps its row, marked
stale with the time it was last seen (within LOOKBACK), rather than vanishing.
Prometheus renames a scraped `job` label that clashes with its own to `exported_job`:
the Slurm job is read from either.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.collectors.inert import inert

QUERY_TIMEOUT_S = 5.0
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


class Prometheus:
    """Instant queries against Prometheus' HTTP API."""

    def __init__(self, url: str, timeout: float = QUERY_TIMEOUT_S) -> None:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ClusterError(f"--prometheus {url!r}: give http://HOST:PORT")
        self.url = url.rstrip("/")
        self.timeout = timeout

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as r:
                answer = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise ClusterError(f"Prometheus at {self.url}: {exc.code} {exc.reason}") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"Prometheus at {self.url}: {exc}") from None
        if not isinstance(answer, dict) or answer.get("status") != "success":
            raise ClusterError(f"Prometheus at {self.url}: {answer.get('error', answer)}")
        result = answer.get("data", {}).get("result", [])
        if not isinstance(result, list):
            return []
        for s in result:  # label values are any user's text (a job name, a function)
            if isinstance(s, dict) and isinstance(s.get("metric"), dict):
                s["metric"] = {str(k): inert(str(v)) for k, v in s["metric"].items()}
        return result


def _value(sample: dict[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _job_of(labels: dict[str, str]) -> str:
    return next((labels[k] for k in JOB_LABELS if labels.get(k)), "")


def read_cluster(
    prom: Prometheus, job: str | None = None, stale_after: float = STALE_AFTER_S
) -> list[NodeRow]:
    """Every node seen within LOOKBACK (only those running JOB, given one), by name."""
    now = time.time()
    rows: dict[str, NodeRow] = {}
    # The nodes reporting now (their last sample's time), then those that stopped
    # within LOOKBACK: their series are stale, but a range keeps their last clock.
    live = "max by (node) (timestamp(adaptyst_scrape_duration_seconds))"
    past = f"max by (node) (last_over_time(adaptyst_time_seconds[{LOOKBACK}]))"
    for promql in (live, past):
        for s in prom.query(promql):
            node, t = s.get("metric", {}).get("node"), _value(s)
            if node and t is not None and node not in rows:
                rows[node] = NodeRow(node, t, stale=now - t > stale_after)
    for s in prom.query("avg by (node, kind) (adaptyst_device_utilization_ratio)"):
        _put(rows, s, "util")
    for s in prom.query("sum by (node, kind) (adaptyst_device_power_watts)"):
        _put(rows, s, "power_w")
    for s in prom.query("sum by (node, kind) (rate(adaptyst_device_energy_joules_total[1m]))"):
        _put(rows, s, "energy_w")
    by_job = f"count by (node, {', '.join(JOB_LABELS)})"
    for s in prom.query(f"{by_job} (last_over_time(adaptyst_probe_calls_total[{JOB_WINDOW}]))"):
        labels = s.get("metric", {})
        if labels.get("node") in rows and (j := _job_of(labels)):
            rows[labels["node"]].jobs.add(j)
    p99 = (
        "histogram_quantile(0.99, sum by (node, probe, le) "
        "(rate(adaptyst_probe_latency_seconds_bucket[5m])))"
    )
    for s in prom.query(p99):
        labels, v = s.get("metric", {}), _value(s)
        row = rows.get(labels.get("node", ""))
        if row is not None and v is not None and (row.slowest is None or v > row.slowest[1]):
            row.slowest = (labels.get("probe", "?"), v)
    out = sorted(rows.values(), key=lambda r: r.node)
    return [r for r in out if job in r.jobs] if job else out


def _put(rows: dict[str, NodeRow], sample: dict[str, Any], what: str) -> None:
    labels, v = sample.get("metric", {}), _value(sample)
    row = rows.get(labels.get("node", ""))
    if row is not None and v is not None:
        getattr(row, what)[labels.get("kind", "?")] = v


def kinds(rows: Sequence[NodeRow]) -> list[str]:
    """The device kinds any node has, CPUs first."""
    found = {k for r in rows for k in r.util} | {k for r in rows for k in r.power_w}
    order = {"cpu": 0, "gpu": 1, "opencl": 2, "fpga": 3}
    return sorted(found, key=lambda k: (order.get(k, 9), k))


__all__ = ["ClusterError", "NodeRow", "Prometheus", "kinds", "read_cluster"]
