"""Placement on Dask with real worker processes on this machine, bound to 127.0.0.1:
one worker offering PoCL's OpenCL device, one the CPU alone; the logistic map's OpenCL
variant wins on large inputs and loses on small ones (its launch), and the scheduler's
advisor learns which from the runs themselves."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from distributed import Client, Nanny, Scheduler, SpecCluster  # noqa: E402

from adaptyst_top.dask import DevicePlacement, PlacementError, placed, placement_report  # noqa: E402
from adaptyst_top.dask import demo_kernels as dk  # noqa: E402
from adaptyst_top.dask.offer import detect_kinds  # noqa: E402
from adaptyst_top.dask.placed import TOPIC  # noqa: E402
from adaptyst_top.placement.kernels import LOGISTIC_STEPS  # noqa: E402
from adaptyst_top.placement.task_keys import size_bucket  # noqa: E402

SMALL, LARGE = 2_000, 400_000


# Workers' scratch space in a directory of the test's own (mkdtemp's: mode 0700, a name no one can guess), not
# Dask's default /tmp/dask-scratch-space, a name anyone could have made first.
SCRATCH = tempfile.mkdtemp(prefix="adt-dask-")
atexit.register(shutil.rmtree, SCRATCH, True)


def worker(resources: dict[str, float] | None) -> dict[str, Any]:
    options: dict[str, Any] = {"host": "127.0.0.1", "nthreads": 1, "dashboard_address": None}
    options["local_directory"] = SCRATCH
    if resources is not None:
        options["resources"] = resources
    return {"cls": Nanny, "options": options}


def cluster(**workers: dict[str, Any]) -> SpecCluster:
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)


@pytest.fixture
def two_workers() -> Iterator[Client]:
    """'gpu': offers PoCL's OpenCL device; 'plain': declares a CPU only (so nothing is
    detected for it)."""
    warnings.filterwarnings("ignore", message="Sending large graph")
    with cluster(gpu=worker({"opencl": 1}), plain=worker({"cpu": 1})) as c, Client(c) as client:
        client.register_plugin(DevicePlacement("time"))
        offering = [
            a for a, w in client.scheduler_info()["workers"].items() if w["resources"].get("opencl")
        ]
        client.run(dk.warm, workers=offering)  # the program built, as an application does first
        yield client


def inputs(rng: np.random.Generator, n: int) -> np.ndarray:
    return (0.05 + 0.9 * rng.random(n, dtype=np.float32)).astype(np.float32)


def settled(x: np.ndarray) -> np.ndarray:
    """Where the map's answer does not hang on rounding: its float64 run ends in the same
    place from the input two float32 steps either side. Near the map's unstable point
    (0.6875) and what leads there (0.3125, 0.8903...) 64 steps do not settle, and any
    two devices' roundings part there (numpy's float32 too)."""
    ends = []
    for start in (x, np.nextafter(np.nextafter(x, 1), 1), np.nextafter(np.nextafter(x, 0), 0)):
        v = start.astype(np.float64)
        for _ in range(LOGISTIC_STEPS):
            v = 3.2 * v * (1.0 - v)
        ends.append(v)
    return np.isclose(ends[0], ends[1], atol=1e-3) & np.isclose(ends[0], ends[2], atol=1e-3)


def agrees(x: np.ndarray, y: np.ndarray) -> bool:
    """Y is the CPU variant's answer on X wherever that answer is settled()."""
    want = dk.logistic_cpu(x.copy())
    ok = settled(x)
    assert ok.mean() > 0.999
    return bool(np.allclose(y[ok], want[ok], rtol=1e-3, atol=1e-3))


def test_calls_go_to_the_device_their_runs_say_and_answer_as_the_cpu(two_workers: Client) -> None:
    client = two_workers
    rng = np.random.default_rng(1)
    rounds = 24
    for _ in range(rounds):
        xs = [inputs(rng, n) for n in (SMALL,) * 3 + (LARGE,) * 3]
        ys = client.gather(client.map(dk.logistic, xs, pure=False))
        assert all(agrees(x, y) for x, y in zip(xs, ys, strict=True))
    calls = rounds * 6
    report = placement_report(client)
    assert report["placed"] == calls and report["ignored_events"] == 0
    assert report["place_us_per_task"] < 1000  # Dask's own is ~1 ms a task
    runs = [msg for _, msg in client.get_events(TOPIC)]
    assert len(runs) == calls
    # Every OpenCL run ran on the worker that offers the device.
    offering = {
        a for a, w in client.scheduler_info()["workers"].items() if w["resources"].get("opencl")
    }
    assert {m["worker"] for m in runs if m["kind"] == "opencl"} <= offering
    rows = {r["size_bucket"]: r for r in report["tasks"] if r["task"] == "logistic"}
    assert set(rows) == {size_bucket(SMALL), size_bucket(LARGE)}
    for bucket, row in rows.items():
        # Both devices measured, and the one chosen is not slower than the other by more
        # than this shared node's noise, in the runs' own medians: what this machine
        # answered, whichever it is (PoCL's launch loses on 2,000 elements here; its
        # SIMD over both cores wins on 400,000).
        times: dict[str, list[float]] = {}
        for m in runs:
            if size_bucket(m["size"]) == bucket:
                times.setdefault(m["kind"], []).append(m["t"])
        assert set(times) == {"cpu", "opencl"} == set(row["runs"]), row
        median = {k: float(np.median(v)) for k, v in times.items()}
        other = "opencl" if row["device"] == "cpu" else "cpu"
        assert median[row["device"]] <= 1.25 * median[other], (median, row)
        assert sum(row["runs"].values()) == calls // 2 and row["nodes"] == {"127.0.0.1": calls // 2}


def test_a_task_no_worker_can_run_errs_saying_so_and_the_rest_run(two_workers: Client) -> None:
    client = two_workers
    only_cuda = placed("cudaonly", {"cuda": dk.logistic_cpu}, size=len)
    bad_size = placed("badsize", {"cpu": dk.logistic_cpu}, size=lambda x: float("nan"))
    x = inputs(np.random.default_rng(2), SMALL)
    with pytest.raises(PlacementError, match="variants for cuda but the workers offer cpu, opencl"):
        client.submit(only_cuda, x).result()
    with pytest.raises(PlacementError, match=r"badsize: size.* not a finite count"):
        client.submit(bad_size, x).result()
    assert agrees(x, client.submit(dk.logistic, x).result())


def test_bad_settings_and_bad_variants_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="objective 'fastest' is not one of"):
        DevicePlacement("fastest")
    with pytest.raises(ValueError, match="unknown device kind 'fpga'"):
        placed("x", {"fpga": print})
    with pytest.raises(ValueError, match="at least one variant"):
        placed("x", {})
    assert placed("x", {"cpu": len})([1, 2]) == 2  # outside Dask: the CPU variant


def test_devices_are_detected_on_a_worker_that_declares_none() -> None:
    expected = set(detect_kinds())  # what this node has, asked the same way

    def offered(dask_scheduler: Any) -> list[set[str]]:
        return [set(w.resources) for w in dask_scheduler.workers.values()]

    with cluster(bare=worker(None)) as c, Client(c) as client:
        client.register_plugin(DevicePlacement())
        client.wait_for_workers(1)
        deadline = time.monotonic() + 30
        while client.run_on_scheduler(offered) != [expected] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.run_on_scheduler(offered) == [expected]


def test_a_worker_that_leaves_is_forgotten_and_its_models_kept(two_workers: Client) -> None:
    client = two_workers
    rng = np.random.default_rng(3)
    for _ in range(6):  # learn: large inputs measured on both devices
        client.gather(client.map(dk.logistic, [inputs(rng, LARGE) for _ in range(4)], pure=False))
    offering = [
        a for a, w in client.scheduler_info()["workers"].items() if w["resources"].get("opencl")
    ]
    client.retire_workers(offering, close_workers=True)
    xs = [inputs(rng, LARGE) for _ in range(4)]
    ys = client.gather(client.map(dk.logistic, xs, pure=False), errors="raise")
    assert all(
        agrees(x, y) for x, y in zip(xs, ys, strict=True)
    )  # all ran, on the CPU that is left
    row = next(
        r for r in placement_report(client)["tasks"] if r["size_bucket"] == size_bucket(LARGE)
    )
    assert row["runs"].get("opencl", 0) > 0 and row["runs"]["cpu"] > 0  # what it learnt stays


def test_two_placed_tasks_of_one_name_never_share_a_dask_key() -> None:
    from dask.base import tokenize

    def factory(k: int) -> Any:
        return placed("scaled", {"cpu": lambda x: x * k})

    a, b = factory(2), factory(3)
    assert tokenize(a, 1) != tokenize(b, 1) and tokenize(a, 1) == tokenize(a, 1)
    with pytest.raises(PlacementError, match=r"not a finite count in \[0, 2\^63\)"):
        placed("big", {"cpu": len}, size=lambda x: 1e20).input_size([1])


def test_forged_or_damaged_run_events_are_counted_and_learnt_from_never() -> None:
    from types import SimpleNamespace

    plugin = DevicePlacement()
    worker_state = SimpleNamespace(host="127.0.0.1", resources={})
    plugin.scheduler = SimpleNamespace(workers={"tcp://127.0.0.1:1": worker_state}, resources={})
    stream = plugin.stream("t", 10, ["cpu"])
    good = {"v": 1, "stream": stream.task, "kind": "cpu", "explored": False, "size": 1000}
    good |= {"t": 0.01, "worker": "tcp://127.0.0.1:1"}
    bad = [
        {**good, "worker": "tcp://10.9.9.9:1"},  # no worker of this cluster
        {**good, "kind": "opencl"},  # a kind the stream does not place
        {**good, "t": 10**400},
        {**good, "t": float("inf")},
        {**good, "size": 2**1100},
        {**good, "stream": ["x"]},
        "not a dict",
        {**good, "v": 99},
    ]
    for msg in bad:
        plugin.log_event(TOPIC, msg)
    plugin.log_event(TOPIC, good)
    assert plugin.ignored == len(bad)
    assert list(plugin.figures) == [(stream.task, "cpu", "127.0.0.1")]
