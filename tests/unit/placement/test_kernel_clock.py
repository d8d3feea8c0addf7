"""A task's accelerator runs timed on the device's clock: the application names the
task's kernels (device_for(..., kernels=...)), the hello carries them over the real
control channel, and the loop learns the kernels' device time in place of the host
thread's; only where it says one thing, and only from applications that may mark the
task."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.placement.control import Client, ControlClient, ControlServer
from adaptyst_top.placement.kernel_clock import KernelClock, device_ns
from adaptyst_top.placement.loop import PlacementLoop
from adaptyst_top.placement.protocol import ProtocolError, decode, encode
from adaptyst_top.placement.task_api import device_for
from adaptyst_top.snapshot import Latency, ProbeEntry
from experiments.placement.baseline.advisor import Advisor
from tests.support.waits import wait_until
from tests.unit.collectors.test_hub_and_loop import snapshot, task_entry


def kernel_row(name: str, count: int, mean_ns: float, kind: str = "cuda") -> ProbeEntry:
    return ProbeEntry(
        group=1, id=1, spec=f"{kind}:*", name=name, kind=kind,  # type: ignore[arg-type]
        key=name, state="attached", count=count, timed=count, latency=Latency(mean_ns=mean_ns),
    )  # fmt: skip


def test_a_hello_carries_each_named_tasks_kernel_globs() -> None:
    msg = decode(encode("hello", pid=7, tasks=["spmv"], kernels={"spmv": ["_Z4spmv*", "[[]HtoD]"]}))
    assert msg.fields["kernels"] == {"spmv": ["_Z4spmv*", "[[]HtoD]"]}
    assert decode(encode("hello", pid=7, tasks=["spmv"])).fields["kernels"] == {}
    for bad in (
        ["x"],  # not a mapping
        {"gemm": ["g*"]},  # a task the hello does not name
        {"spmv": []},
        {"spmv": ["a b"]},
        {"spmv": [f"k{i}" for i in range(9)]},
        {"spmv": [1]},
    ):
        with pytest.raises(ProtocolError, match="bad kernels"):
            decode(encode("hello", pid=7, tasks=["spmv"], kernels=bad))


def test_device_for_refuses_globs_the_channel_would_not_carry() -> None:
    with pytest.raises(ValueError, match="at most 8 globs"):
        device_for("t_bad_glob", 10, ["cpu"], kernels=["$(id)"])
    with pytest.raises(ValueError, match="at most 8 globs"):
        device_for("t_bad_glob", 10, ["cpu"], kernels=[f"k{i}" for i in range(9)])


def test_marks_come_only_from_applications_that_may_have_the_task(tmp_path: Path) -> None:
    server = ControlServer(tmp_path / "c.sock")
    try:
        mine = Client(None, 1, 0, ["spmv"], {"spmv": ["_Z4spmv*"]}, registered=True)  # type: ignore[arg-type]
        # Another user's application naming a task only it runs: its own marks stand...
        theirs = Client(None, 2, 4242, ["gemm"], {"gemm": ["g*"]}, registered=True)  # type: ignore[arg-type]
        # ...but not on a task two users' applications name.
        shared = Client(None, 3, 4243, ["spmv"], {"spmv": ["*"]}, registered=True)  # type: ignore[arg-type]
        server.clients.extend([mine, theirs, shared])
        assert server.kernel_marks() == {"spmv": ("_Z4spmv*",), "gemm": ("g*",)}
    finally:
        server.clients.clear()
        server.close()


def test_the_kernel_clock_counts_what_rows_gained_once() -> None:
    clock = KernelClock()
    assert clock.interval([kernel_row("a", 10, 100.0)]) == {"a": 1000.0}
    gained = clock.interval([kernel_row("a", 30, 100.0), kernel_row("a", 30, 100.0, "cuda")])
    assert gained == {"a": 2000.0}  # two specs' rows of one kernel: once
    assert clock.interval([kernel_row("a", 5, 100.0)]) == {}  # started over
    assert (
        device_ns({"_Z4spmvPf": 5.0, "_Z4gemmPf": 7.0, "[HtoD]": 1.0}, ["_Z4spmv*", "[[]HtoD]"])
        == 6.0
    )


def test_the_loop_learns_an_accelerator_run_on_the_devices_clock(tmp_path: Path) -> None:
    """spmv on opencl:0 takes 5 ms a run on the host thread (launch, wait, copies), its
    kernels 1 ms of device time: the advisor learns 1 ms there, 2 ms on the CPU."""
    server = ControlServer(tmp_path / "c.sock")
    client = ControlClient(
        ["spmv"], lambda t, d, r: None, server.path, 0.1, kernels={"spmv": ["_Z4spmv*"]}
    )
    loop = PlacementLoop(Advisor(["cpu", "opencl:0"], objective="time"), control=server)
    try:
        assert wait_until(lambda: server.kernel_marks() == {"spmv": ("_Z4spmv*",)})
        loop.update(snapshot(0.0))
        for i in range(1, 20):
            gpu = task_entry("spmv|opencl:0|10|0", 10 * i, 5e6)
            cpu = task_entry("spmv|cpu|10|0", 10 * i, 2e6)
            kernels = kernel_row("_Z4spmvPKfPf", 10 * i, 1e6, "opencl")
            other = kernel_row("_Z4gemmPf", 10 * i, 7e6, "opencl")  # another task's
            part = loop.update(snapshot(float(i), gpu, cpu, kernels, other))
        (task,) = part.tasks
        assert task.predicted["opencl:0"]["time_s"] == pytest.approx(1e-3, rel=0.05)
        assert task.predicted["cpu"]["time_s"] == pytest.approx(2e-3, rel=0.05)
        assert part.advisor is not None and "on the device's clock: spmv" in part.advisor.detail
    finally:
        client.close()
        loop.close()


def test_runs_in_two_accelerator_buckets_keep_the_host_clock(tmp_path: Path) -> None:
    """Device time cannot be split between two sizes' runs: both keep their own time."""
    server = ControlServer(tmp_path / "c.sock")
    client = ControlClient(
        ["spmv"], lambda t, d, r: None, server.path, 0.1, kernels={"spmv": ["_Z4spmv*"]}
    )
    loop = PlacementLoop(Advisor(["cpu", "opencl:0"], objective="time"), control=server)
    try:
        assert wait_until(lambda: bool(server.kernel_marks()))
        loop.update(snapshot(0.0))
        for i in range(1, 10):
            small = task_entry("spmv|opencl:0|10|0", 10 * i, 5e6)
            big = task_entry("spmv|opencl:0|12|0", 10 * i, 9e6)
            part = loop.update(
                snapshot(float(i), small, big, kernel_row("_Z4spmvPKfPf", 20 * i, 1e6))
            )
        host = {(10, 0): 5e-3, (12, 0): 9e-3}
        for t in part.tasks:
            assert t.predicted["opencl:0"]["time_s"] == pytest.approx(
                host[t.input_bucket], rel=0.05
            )
        assert part.advisor is not None and "device's clock" not in part.advisor.detail
    finally:
        client.close()
        loop.close()
