"""The layers joined without root: the hub's snapshot from real device collectors (a fake
NVML with the real API's names), and the advisor's part learnt from task probe entries."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from adaptyst_top.collectors.devices.opencl import OpenCLCollector
from adaptyst_top.collectors.devices.sweep import DeviceSweep
from adaptyst_top.collectors.hub import Hub
from adaptyst_top.placement.learned_advisor import LOOK_RUNS, LearnedAdvisor
from adaptyst_top.placement.loop import TASK_PROBE_NAME, PlacementLoop
from adaptyst_top.placement.move_log import KEPT
from adaptyst_top.snapshot import (
    DeviceReading,
    Latency,
    ProbeEntry,
    Snapshot,
)
from adaptyst_top.snapshot.histogram import bucket_of, percentile
from experiments.placement.baseline.advisor import Advisor
from tests.support.fake_nvml import FakeGpu, FakeNvml


def test_the_hub_snapshot_of_devices_alone(tmp_path: Path) -> None:
    sweep = DeviceSweep(
        sysfs=tmp_path, nvml=FakeNvml([FakeGpu()]), opencl=OpenCLCollector(lambda: [])
    )
    hub = Hub(None, sweep)
    first = hub.snapshot()
    second = hub.snapshot()
    assert second.t >= first.t >= 0 and first.host
    assert [d.id for d in first.devices] == ["cpu", "gpu:0"]
    gpu = first.devices[1]
    assert gpu.kind == "gpu" and gpu.util is not None and 0 <= gpu.util <= 1
    sources = {s.name: s.state for s in first.device_sources or ()}
    assert sources["nvml"] == "ok" and sources["rapl"] != "ok"  # no powercap in tmp_path
    assert first.probes == () and first.overhead is None and not first.target_ended
    assert first.to_json()["devices"][1]["id"] == "gpu:0"


def task_entry(key: str, count: int, mean_ns: float) -> ProbeEntry:
    return ProbeEntry(
        group=0,
        id=0,
        spec="usdt:./app:adaptyst:task_begin..task_end@arg1",
        name=TASK_PROBE_NAME,
        kind="usdt",
        key=key,
        state="attached",
        count=count,
        latency=Latency(mean_ns, mean_ns, mean_ns, mean_ns, mean_ns, mean_ns),
    )


def snapshot(t: float, *probes: ProbeEntry) -> Snapshot:
    cpu = DeviceReading("cpu", "cpu", "CPU", util=0.5, power_w=50.0)
    cl = DeviceReading("opencl:0", "opencl", "PoCL", util=0.5, extra={"maps_to": "cpu"})
    return Snapshot(t=t, host="n", probes=probes, devices=(cpu, cl))


def test_the_loop_learns_from_entries_and_returns_its_part() -> None:
    loop = PlacementLoop(Advisor(["cpu", "opencl:0"], objective="time"))
    empty = loop.update(snapshot(0.0))
    assert empty.tasks == () and empty.advice == ()
    assert empty.advisor is not None and empty.advisor.state == "learning"
    part = empty
    for i in range(1, 30):  # gemm keeps running on the CPU at 2 ms a run
        snap = snapshot(float(i), task_entry("gemm|cpu|10|0", 10 * i, 2e6))
        part = loop.update(snap)
        assert snap.tasks == () and snap.advisor is None  # the snapshot given is not changed
    (task,) = part.tasks
    assert (task.task, task.device, task.executions) == ("gemm", "cpu", 290)
    assert task.input_bucket == (10, 0)
    assert task.predicted["cpu"]["time_s"] == pytest.approx(2e-3, rel=0.05)
    assert part.advisor is not None and part.advisor.state == "running"
    # The OpenCL device was never measured: the advisor proposes exploring it.
    (advice,) = part.advice
    assert (advice.task, advice.current, advice.suggested) == ("gemm", "cpu", "opencl:0")
    assert advice.explore
    assert loop.apply("gemm") == 0  # no application connected: told to none
    with pytest.raises(LookupError):
        loop.apply("gemm")  # applied once
    after = loop.update(snapshot(31.0, task_entry("gemm|cpu|10|0", 300, 2e6)))
    assert after.advisor is not None
    (move,) = after.advisor.moves
    assert (move.task, move.source, move.to, move.explore, move.sent) == (
        "gemm",
        "cpu",
        "opencl:0",
        True,
        0,
    )
    merged = replace(snapshot(31.0), tasks=after.tasks, advisor=after.advisor)
    assert merged.to_json()["advisor"]["moves"][0]["from"] == "cpu"


def test_the_learner_in_the_loop_looks_then_moves_and_says_how_sure() -> None:
    """The monitor's placer: from snapshots' task rows, a look at the device never run,
    applied; then PoCL's runs at a quarter of the CPU's make the move, logged with the
    gain it predicted and then the gain measured over the runs after it."""
    loop = PlacementLoop(LearnedAdvisor(["cpu", "opencl:0"]))
    cpu = ocl = 0
    part = loop.update(snapshot(0.0))
    for i in range(1, 4):
        cpu += 50
        part = loop.update(snapshot(float(i), task_entry("gemm|cpu|10|0", cpu, 2e6)))
    (advice,) = part.advice
    assert advice.explore and advice.suggested == "opencl:0"
    assert loop.apply("gemm") == 0
    ocl += LOOK_RUNS
    rows = [task_entry("gemm|cpu|10|0", cpu, 2e6), task_entry("gemm|opencl:0|10|0", ocl, 5e5)]
    part = loop.update(snapshot(4.0, *rows))
    (advice,) = part.advice
    assert not advice.explore and advice.suggested == "opencl:0"
    assert advice.time_gain == pytest.approx(0.75, abs=0.05) and advice.confidence > 0.5
    (task,) = part.tasks
    assert task.best == "opencl:0" and task.gain == pytest.approx(0.75, abs=0.05)
    assert task.predicted["opencl:0"]["time_factor"] > 1.0
    loop.apply("gemm")
    for i in range(5, 8):
        ocl += 100
        rows = [task_entry("gemm|cpu|10|0", cpu, 2e6), task_entry("gemm|opencl:0|10|0", ocl, 5e5)]
        part = loop.update(snapshot(float(i), *rows))
    assert part.advisor is not None
    move = next(m for m in part.advisor.moves if not m.explore)
    assert (move.source, move.to, move.runs) == ("cpu", "opencl:0", 300)
    assert move.predicted_gain == pytest.approx(0.75, abs=0.05)
    assert move.measured_gain == pytest.approx(0.75, abs=0.05)
    (task,) = part.tasks
    assert (task.device, task.state) == ("opencl:0", "settled")


def test_moves_kept_are_bounded() -> None:
    loop = PlacementLoop(Advisor(["cpu", "opencl:0"]))
    loop.set_mode("auto")
    for i in range(1, 200):
        loop.update(snapshot(float(i), task_entry(f"t{i % 50}|cpu|10|0", i, 1e6)))
    assert len(loop.log.moves()) == KEPT  # 50 tasks explored: more moves made than kept


def test_a_few_runs_are_learnt_at_their_own_median_not_the_keys_so_far() -> None:
    # A look of three slow runs (40, 20, 20 ms: the first carried the data), then one
    # of two at 10 ms: the second is learnt at 10 ms, its own runs' median, from the
    # histograms' growth, not at the key's median over all five runs (20 ms).
    loop = PlacementLoop(Advisor(["cpu", "opencl:0"], objective="time"))
    ns = (40_000_000, 20_000_000, 20_000_000, 10_000_000, 10_000_000)
    key = "t|opencl:0|10|0"
    learnt: list[float] = []
    for t, upto in ((1.0, 3), (2.0, 5)):
        runs = ns[:upto]
        hist: dict[int, int] = {}
        for x in runs:
            hist[bucket_of(x)] = hist.get(bucket_of(x), 0) + 1
        mean = sum(runs) / len(runs)
        entry = replace(
            task_entry(key, len(runs), mean),
            latency=Latency(mean, percentile(hist, 0.5)),
            raw=Latency(mean),
            hist=tuple(sorted(hist.items())),
        )
        loop.update(snapshot(t, entry))
        model = loop.advisor.models[("t", "opencl:0")].time[(10, 0)]
        learnt.append(model.recent_values[-1])
    assert learnt[-1] == pytest.approx(10e-3, rel=0.05)
    cumulative = percentile(hist, 0.5)
    assert cumulative is not None and cumulative > 12e6  # what it was learnt at before
