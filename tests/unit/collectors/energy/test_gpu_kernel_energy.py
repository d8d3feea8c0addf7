"""Joules per CUDA kernel: the session's processes' GPU joules (NVML's per-process
split, as the NVML collector reports it) go to their kernel rows by device time, as
much as the kernels' time covers of the processes' busy time; task rows get what is
left, never the same joule twice; rows never add up to more than the processes'."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.energy.gpu_split import METHOD
from adaptyst_top.collectors.energy.gpu_tasks import GpuTaskEnergy
from adaptyst_top.snapshot import DeviceReading, Latency, ProbeEntry

MINE, OTHER = 100, 200


def kernel(
    name: str, count: int, mean_ns: float, kind: str = "cuda", key: str | None = None
) -> ProbeEntry:
    return ProbeEntry(
        group=0, id=0, spec="cuda:*", name=name, kind=kind,  # type: ignore[arg-type]
        key=key or name, state="attached", count=count, timed=count,
        latency=Latency(mean_ns=mean_ns),
    )  # fmt: skip


def gpu(energy_j: float, mine_j: float, other_j: float, mine_util: float = 0.5) -> DeviceReading:
    procs = [
        {"pid": MINE, "mem_bytes": 1, "energy_j": mine_j, "sm_util": mine_util},
        {"pid": OTHER, "mem_bytes": 1, "energy_j": other_j, "sm_util": 0.3},
    ]
    return DeviceReading(
        id="gpu0", kind="gpu", name="H200", energy_j=energy_j, energy_source="nvml",
        extra={"process_energy": METHOD, "processes": procs},
    )  # fmt: skip


def run(
    rows_then: list[ProbeEntry],
    rows_now: list[ProbeEntry],
    window_s: float,
    util: float,
    held: tuple[int, ...] = (MINE,),
) -> GpuTaskEnergy:
    split = GpuTaskEnergy(holds=lambda pid: pid in held)
    refs = [f"r{i}" for i in range(len(rows_now))]
    split.update(rows_then, refs[: len(rows_then)], [gpu(1000.0, 10.0, 10.0, util)], now=100.0)
    split.update(rows_now, refs, [gpu(1300.0, 110.0, 60.0, util)], now=100.0 + window_s)
    return split


def test_kernels_share_their_processs_joules_by_device_time() -> None:
    """A 1 s window, the process busy half of it (500 ms of SM time), its kernels 400 ms
    of device time (3:1): they get 80% of its 100 J, 60 J and 20 J; none of the other's."""
    then = [kernel("a", 0, 1.0), kernel("b", 0, 1.0)]
    now = [kernel("a", 3000, 100_000.0), kernel("b", 1000, 100_000.0)]
    split = run(then, now, 1.0, 0.5)
    assert split.joules["r0"] == pytest.approx(60.0) and split.joules["r1"] == pytest.approx(20.0)
    assert split.attributed_j == pytest.approx(80.0)
    assert split.measured_j == pytest.approx(300.0)


def test_kernels_covering_the_busy_time_get_it_all_and_tasks_nothing_more() -> None:
    """Kernels of 600 ms against 500 ms busy (timing rounding, overlap): they get the
    process's 100 J, capped; its GPU task row, whose time spans them, gets no joule."""
    then = [kernel("a", 0, 1.0), kernel("t", 0, 1.0, kind="usdt", key="t|cuda:0|9|0")]
    now = [
        kernel("a", 6000, 100_000.0),
        kernel("t", 10, 90_000_000.0, kind="usdt", key="t|cuda:0|9|0"),
    ]
    split = run(then, now, 1.0, 0.5)
    assert split.joules["r0"] == pytest.approx(100.0)
    assert split.joules.get("r1", 0.0) == pytest.approx(0.0)
    assert split.attributed_j == pytest.approx(100.0)


def test_tasks_get_what_kernels_leave() -> None:
    """Kernels of 100 ms against 500 ms busy: 20 J theirs; the task row (900 ms of a 1 s
    window) gets 90% of the 80 J left."""
    then = [kernel("a", 0, 1.0), kernel("t", 0, 1.0, kind="usdt", key="t|cuda:0|9|0")]
    now = [
        kernel("a", 1000, 100_000.0),
        kernel("t", 10, 90_000_000.0, kind="usdt", key="t|cuda:0|9|0"),
    ]
    split = run(then, now, 1.0, 0.5)
    assert split.joules["r0"] == pytest.approx(20.0)
    assert split.joules["r1"] == pytest.approx(72.0)
    assert split.attributed_j <= 100.0


def test_copies_are_no_kernels_joules() -> None:
    """[HtoD] and the like run on the copy engines: no share of the SMs' joules."""
    then = [kernel("a", 0, 1.0), kernel("[HtoD]", 0, 1.0)]
    now = [kernel("a", 1000, 100_000.0), kernel("[HtoD]", 1000, 300_000.0)]
    split = run(then, now, 1.0, 0.5)
    assert split.joules["r0"] == pytest.approx(20.0) and "r1" not in split.joules


def test_two_processes_joules_are_no_kernels_when_rows_cannot_say_whose() -> None:
    """Both processes held and both spent GPU joules: a kernel row does not say which
    process it ran in, so no kernel row is charged (the task rows may be)."""
    then = [kernel("a", 0, 1.0)]
    now = [kernel("a", 3000, 100_000.0)]
    split = run(then, now, 1.0, 0.5, held=(MINE, OTHER))
    assert split.joules.get("r0", 0.0) == 0.0 and split.attributed_j == 0.0
