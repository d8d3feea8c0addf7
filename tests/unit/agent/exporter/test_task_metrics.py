"""Tasks and placement in the agent's metrics, from the placement API's task rows:
runs per task and device, time and energy per run, the device each runs on, moves;
and what the admin's export level lets out."""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from adaptyst_top.agent.exporter.collector import AgentCollector, ProbeSource
from adaptyst_top.placement.loop import TASK_PROBE_NAME
from adaptyst_top.placement.task_keys import parse_key, task_key
from adaptyst_top.snapshot import DeviceReading, Latency, ProbeEntry

CPU = DeviceReading("cpu", "cpu", "CPU", power_w=50.0)


def row(device: str, runs: int, mean_ns: float) -> ProbeEntry:
    lat = Latency(mean_ns, mean_ns, mean_ns, mean_ns, mean_ns, mean_ns)
    return ProbeEntry(
        group=1, id=0, spec="usdt:x:adaptyst:task_begin..task_end@arg1", name=TASK_PROBE_NAME,
        kind="usdt", key=task_key("gemm", device, 4096), state="attached", count=runs,
        latency=lat,
    )  # fmt: skip


def samples(collector: AgentCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            if s.name.startswith("adaptyst_task"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(
    got: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    hits = [v for (n, ls), v in got.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def test_runs_time_energy_current_device_and_moves() -> None:
    rows = [row("cpu", 10, 2e6)]
    src = [ProbeSource("alice", "42", rows, None)]
    collector = AgentCollector(lambda: [CPU], lambda: src, "jobs")
    got = samples(collector)
    assert value(got, "adaptyst_task_runs_total", task="gemm", device="cpu") == 10
    assert value(got, "adaptyst_task_run_seconds", task="gemm", device="cpu") == 0.002
    assert value(got, "adaptyst_task_run_joules", task="gemm", device="cpu") == 0.1  # 50 W x 2 ms
    info = [dict(ls) for (n, ls), _ in got.items() if n == "adaptyst_task_placement_info"]
    assert [i["current"] for i in info] == ["cpu"]
    assert value(got, "adaptyst_task_moves_total", task="gemm") == 0
    # The task moves to the OpenCL device: its runs now go there.
    rows.append(row("opencl:0", 30, 1e6))
    got = samples(collector)
    info = [dict(ls) for (n, ls), _ in got.items() if n == "adaptyst_task_placement_info"]
    assert info[0]["current"] == "opencl:0"
    assert value(got, "adaptyst_task_moves_total", task="gemm") == 1
    # The export level: a user's session outside any job is not exported at "jobs".
    outside = AgentCollector(lambda: [CPU], lambda: [ProbeSource("bob", None, rows, None)], "jobs")
    assert samples(outside) == {}


def test_one_cap_over_task_and_probe_series_and_drops_counted_once() -> None:
    """One user's 10,000 task names: the cap holds over tasks and probes together, the
    dropped counter counts each label set once however often it is scraped."""
    flood = [
        dataclasses.replace(row("cpu", 1, 1e3), key=task_key(f"t{i}", "cpu", 1), rate_hz=i)
        for i in range(10_000)
    ]
    src = [ProbeSource("mallory", "7", flood, None)]
    collector = AgentCollector(lambda: [CPU], lambda: src, "all", max_series=200)
    for _ in range(2):
        registry = CollectorRegistry()
        registry.register(collector)
        fams = {
            f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
        }
        kept_tasks = {s.labels["task"] for s in fams["adaptyst_task_runs"].samples}
        kept_probes = {s.labels["key"] for s in fams["adaptyst_probe_calls"].samples}
        assert len(kept_tasks) + len(kept_probes) == 200
        # The most active stay: the highest rates.
        assert "t9999" in kept_tasks | {parse_key(k)[0] for k in kept_probes if parse_key(k)}
        dropped = fams["adaptyst_probe_series_dropped"].samples[0].value
        assert dropped == 2 * 10_000 - 200  # a row and a task label set each, once


def test_a_histogram_read_between_hits_never_has_inf_below_a_bucket() -> None:
    """The count and the buckets come from two maps read one after the other: hits
    landing between the two reads were once in the buckets only."""
    hist = ((213, 7),)  # 7 calls in one bucket (~10 us), while the count read before said 5
    entry = dataclasses.replace(row("cpu", 5, 1e4), name="f", key=None, hist=hist)
    collector = AgentCollector(lambda: [CPU], lambda: [ProbeSource("a", "1", [entry], None)], "all")
    registry = CollectorRegistry()
    registry.register(collector)
    fam = next(
        f
        for f in text_string_to_metric_families(generate_latest(registry).decode())
        if f.name == "adaptyst_probe_latency_seconds"
    )
    buckets = [s for s in fam.samples if s.name.endswith("_bucket")]
    inf = next(s.value for s in buckets if s.labels["le"] == "+Inf")
    assert buckets and all(s.value <= inf for s in buckets)
