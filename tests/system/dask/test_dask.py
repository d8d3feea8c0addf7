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

from adaptyst_top.collectors.energy.calls import WINDOW_S  # noqa: E402
from adaptyst_top.dask import DevicePlacement, PlacementError, placed, placement_report  # noqa: E402
from adaptyst_top.dask import demo_kernels as dk  # noqa: E402
from adaptyst_top.dask.offer import detect_kinds  # noqa: E402
from adaptyst_top.dask.placed import TOPIC  # noqa: E402
from adaptyst_top.placement.kernels import LOGISTIC_STEPS  # noqa: E402
from adaptyst_top.placement.task_keys import size_bucket  # noqa: E402

# serial: which device runs faster
pytestmark = pytest.mark.serial

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
    # Its HTTP routes on a free loopback port: another Dask on this node holds 8787.
    http = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", **http}}
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
    # Its cost is measured, not bounded here (a busy machine doubles it): bench/dask_eval.py.
    assert 0 < report["place_us_per_task"] < float("inf")
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
        # than this shared node's noise (at least 25%), in the runs' own medians (with a
        # fixed 25%, a CPU median 1.37x PoCL's on 2,000 elements failed CI once): what this machine
        # answered, whichever it is (PoCL's launch loses on 2,000 elements here; its
        # SIMD over both cores wins on 400,000). Warm runs only, as the learner counts
        # them: a device's first run of the task pays its build (a cold PoCL run of 2.2
        # ms beside one warm of 0.18 made a median 6x the CPU's and failed CI once).
        times: dict[str, list[float]] = {}
        for i, m in enumerate(runs):
            if size_bucket(m["size"]) == bucket and m["kind"] in (r["kind"] for r in runs[:i]):
                times.setdefault(m["kind"], []).append(m["t"])
        assert set(times) == {"cpu", "opencl"} == set(row["runs"]), row
        median = {k: float(np.median(v)) for k, v in times.items()}
        # The node's noise, from the runs themselves: each device's interquartile range
        # over its median.
        spread = {
            k: float(np.subtract(*np.percentile(v, [75, 25]))) / median[k] for k, v in times.items()
        }
        other = "opencl" if row["device"] == "cpu" else "cpu"
        within = max(1.25, 1 + max(spread.values()))
        assert median[row["device"]] <= within * median[other], (median, spread, row)
        assert sum(row["runs"].values()) == calls // 2 and row["nodes"] == {"127.0.0.1": calls // 2}
        # The learner's prediction for the device it chose is what the runs there said
        # (within their own spread, and 2x at least), with its uncertainty.
        predicted = row["predicted_ms"][row["device"]] / 1e3
        slack = max(2.0, 1 + 2 * spread[row["device"]])
        assert median[row["device"]] / slack < predicted < slack * median[row["device"]], row
        assert all(1.0 <= f < 10.0 for f in row["predicted_factor"].values()), row


def test_calls_submitted_before_their_inputs_exist_are_placed_when_ready(
    two_workers: Client,
) -> None:
    """A chain of calls, each on the one before's result, submitted as one graph. At
    submission nothing has run anywhere: placed then, every call would go to the CPU.
    Placed as each becomes ready, with what the runs before it taught, the chain itself
    looks at the OpenCL device and goes on where its own runs say."""
    import dask

    client = two_workers
    # A name of its own: the models earlier tests kept (this run's model folder, read
    # as the next cluster's priors) are of "logistic", and "its own runs" are the point.
    chain = placed("logistic_chain", dk.VARIANTS, size=len)
    link = dask.delayed(chain, pure=False)
    y = link(inputs(np.random.default_rng(4), LARGE))
    for _ in range(19):
        y = link(y)
    out = client.compute(y).result()
    assert out.shape == (LARGE,) and bool(np.all((out > 0) & (out < 1)))
    runs = [msg for _, msg in client.get_events(TOPIC)]
    kinds = [m["kind"] for m in runs]
    assert len(runs) == 20 and set(kinds) == {"cpu", "opencl"}, kinds
    assert all(m["size"] == LARGE * 4 for m in runs[1:])  # its input's bytes, once made
    # Each device's warm runs (its first is cold), and the device of the last calls is
    # not slower than the other by more than the node's noise, in those runs' medians.
    warm: dict[str, list[float]] = {}
    for m in runs:
        warm.setdefault(m["kind"], []).append(m["t"])
    median = {k: float(np.median(v[1:] or v)) for k, v in warm.items()}
    spread = {
        k: float(np.subtract(*np.percentile(v, [75, 25]))) / median[k] for k, v in warm.items()
    }
    # Where it went on: the last call placed to run, not one the learner sent to look.
    last = [m["kind"] for m in runs if not m["explored"]][-1]
    other = "opencl" if last == "cpu" else "cpu"
    assert median[last] <= max(1.25, 1 + max(spread.values())) * median[other], (kinds, median)
    report = placement_report(client)
    assert report["placed"] == 20 and report["ignored_events"] == 0
    # The first call sized by len() of the array it was given, the rest by the bytes of
    # the result they take (all the scheduler knows of another task's result).
    rows = {r["size_bucket"]: r for r in report["tasks"] if r["task"] == "logistic_chain"}
    assert set(rows) == {size_bucket(LARGE), size_bucket(LARGE * 4)}
    assert sum(sum(r["runs"].values()) for r in rows.values()) == 20


def test_a_task_no_worker_can_run_errs_saying_so_and_the_rest_run(two_workers: Client) -> None:
    client = two_workers
    only_cuda = placed("cudaonly", {"cuda": dk.logistic_cpu}, size=len)
    bad_size = placed("badsize", {"cpu": dk.logistic_cpu}, size=lambda x: float("nan"))
    x = inputs(np.random.default_rng(2), SMALL)
    with pytest.raises(PlacementError, match="variants for cuda but the workers offer cpu, opencl"):
        client.submit(only_cuda, x).result()
    # size() is the client's code: it runs on the client (PlacedTask.submit/map), and
    # fails there; the scheduler never runs it, and sizes a plain submit itself.
    with pytest.raises(PlacementError, match=r"badsize: size.* not a finite count"):
        bad_size.submit(client, x)
    assert agrees(x, client.submit(bad_size, x).result())
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


def test_damaged_run_reports_are_counted_and_learnt_from_never() -> None:
    """What a worker reports in its task-finished message is learnt from only when it is
    a run of this version, in range, of a call the scheduler itself placed; a Dask event
    (Client.log_event: any client may send one) never is."""
    from types import SimpleNamespace

    from adaptyst_top.dask.placed import METADATA, VERSION
    from adaptyst_top.dask.plugin import Placement

    plugin = DevicePlacement()
    worker_state = SimpleNamespace(host="127.0.0.1", resources={})
    plugin.scheduler = SimpleNamespace(workers={"tcp://127.0.0.1:1": worker_state}, resources={})
    stream = plugin.stream("t", 10, ["cpu"])
    good = {"v": VERSION, "t": 0.01, "e": None, "how": None}
    bad = [
        {**good, "t": 10**400},
        {**good, "t": float("inf")},
        {**good, "t": True},
        {**good, "t": "0.01"},
        {**good, "t": -1.0},
        "not a dict",
        {**good, "v": 99},
        {**good, "e": float("nan")},
        {**good, "e": -1.0},
        {**good, "e": "lots"},
    ]
    for i, run in enumerate([*bad, good]):
        plugin.placements[f"k{i}"] = Placement("t", 10, "cpu", False, 1000)
        plugin.transition(
            f"k{i}", "processing", "memory", worker="tcp://127.0.0.1:1", metadata={METADATA: run}
        )
    assert plugin.ignored == len(bad)
    assert list(plugin.names["t"].figures) == [(10, "cpu", "127.0.0.1")]
    # A run reported again, or for a key the scheduler did not place: nothing learnt.
    plugin.transition(f"k{len(bad)}", "processing", "memory", metadata={METADATA: good})
    plugin.transition("other", "processing", "memory", metadata={METADATA: good})
    assert plugin.names["t"].figures[(10, "cpu", "127.0.0.1")][0] == 1
    # Dask events are not listened to at all.
    plugin.log_event(TOPIC, {**good, "stream": stream.task, "kind": "cpu", "size": 1000})
    assert plugin.names["t"].figures[(10, "cpu", "127.0.0.1")][0] == 1


def test_the_client_sizes_a_call_and_the_scheduler_takes_only_a_plain_count() -> None:
    from adaptyst_top.dask.placed import key_size

    assert key_size("logistic-ab12-s2000") == 2000 and key_size("x-s007") == 7
    assert key_size(f"x-s{2**63}") is None  # beyond what msgpack and the probes carry
    assert key_size("x-s" + "9" * 20) is None
    assert key_size("x-s\u0663") is None  # a digit, but not an ASCII one
    assert key_size("x-s12-0") is None and key_size(("x-s12", 0)) is None
    assert key_size("x-s-1") is None and key_size("x-s1.5") is None
    seven = placed("seven", {"cpu": len}, size=lambda x: 7 * len(x))
    with cluster(plain=worker({"cpu": 1})) as c, Client(c) as client:
        client.register_plugin(DevicePlacement("time"))
        xs = [list(range(n)) for n in (100, 1000, 1001)]
        assert client.gather(seven.map(client, xs)) == [100, 1000, 1001]
        assert seven.submit(client, list(range(10))).result() == 10
        assert client.gather(client.map(seven, xs[:1])) == [100]  # no size(): the count
        report = placement_report(client)
    assert report["sizes"] == {"client": 4, "inputs": 0, "unknown": 1}
    buckets = {r["size_bucket"]: sum(r["runs"].values()) for r in report["tasks"]}
    want = {size_bucket(700): 1, size_bucket(7000): 2, size_bucket(70): 1}
    # The plain call: size() is not the scheduler's to run, a list has no bytes it
    # reads (numpy arrays and bytes have): size 1.
    assert buckets == {**want, size_bucket(1): 1}, buckets


def spin(s: float) -> float:
    end = time.thread_time() + s
    while time.thread_time() < end:
        pass
    return s


def nap(s: float) -> float:
    time.sleep(s)
    return s


def flaky(s: float) -> float:
    raise RuntimeError("this device's driver is broken")


def test_the_energy_objective_puts_a_call_where_it_costs_least_not_where_it_is_fastest() -> None:
    """Spinning 4 ms of CPU time (on the worker offering "opencl") beats napping 40 ms on
    time, even with every core shared five ways; the nap costs far less energy (CPU time
    at the node's joules per busy CPU-second, here from the stated power model, as there
    is no RAPL: the monitor's own rule)."""
    task = placed("wait", {"cpu": lambda s: nap(10 * s) / 10, "opencl": spin}, size=lambda s: 1000)
    chosen = {}
    for objective in ("time", "energy"):
        with (
            cluster(gpu=worker({"opencl": 1}), plain=worker({"cpu": 1})) as c,
            Client(c) as client,
        ):
            client.register_plugin(DevicePlacement(objective, cpu_power_model="10:90"))
            # Rounds over 3 windows of calls.py's at least: the first calls on each
            # worker, before a window is complete, have no energy.
            start, rounds = time.monotonic(), 0
            while rounds < 30 or time.monotonic() - start < 3 * WINDOW_S:
                assert client.gather(client.map(task, [0.004] * 4, pure=False)) == [0.004] * 4
                rounds += 1
            (row,) = placement_report(client)["tasks"]
            chosen[objective] = row["device"]
            report = placement_report(client)
        # On energy, both devices measured in joules; the spin's CPU time costs far more.
        # On time, the nap may have run only before its worker's first window closed
        # (explored early, then never again: 10x slower), so without joules.
        mj = row["mean_mj"]
        if objective == "energy":
            assert set(mj) == {"cpu", "opencl"} and mj["opencl"] >= 10 * mj["cpu"] > 0, row
        else:
            assert mj.get("opencl", 0) > 0, row
        assert report["energy_method"] in ("estimate-oncpu", "rapl-oncpu")  # RAPL where readable
    assert chosen == {"time": "opencl", "energy": "cpu"}, chosen


def test_a_device_whose_calls_only_fail_is_reported_and_left_out(two_workers: Client) -> None:
    """Its explorations come back as failures (never waited for, never learnt as times);
    after FAILS_TO_DROP the stream places no more calls there, the user sees each error."""
    from adaptyst_top.placement.failing import FAILS_TO_DROP

    task = placed("broken", {"cpu": nap, "opencl": flaky}, size=lambda s: 1000)
    errors = 0
    for _ in range(40):
        for f in two_workers.map(task, [0.002] * 4, pure=False):
            if f.exception() is not None:
                errors += 1
                assert "driver is broken" in str(f.exception())
    (row,) = placement_report(two_workers)["tasks"]
    assert row["failed"] == {"opencl": errors} and errors >= FAILS_TO_DROP, row
    assert row["device"] == "cpu" and row["runs"]["cpu"] == 160 - errors
    assert row["explorations"] <= FAILS_TO_DROP  # looks until dropped, none after
    # Left out: the last rounds all ran on the CPU.
    last = [m for _, m in two_workers.get_events(TOPIC)][-8:]
    assert all(m["kind"] == "cpu" and "failed" not in m for m in last), last


def test_a_calls_joules_are_its_cpu_time_at_the_nodes_joules_per_busy_cpu_second() -> None:
    """RunEnergy's arithmetic, on a CPU reading and busy time it is handed: the window's
    energy over its busy CPU-seconds, times the call's CPU time; nothing until a window
    has enough busy time (MIN_SPLIT_NS), as the probe rows' split."""
    from types import SimpleNamespace

    from adaptyst_top.collectors.energy import calls as run_energy
    from adaptyst_top.collectors.energy.probes import MIN_SPLIT_NS
    from adaptyst_top.snapshot import EnergyReading

    state = {"j": 0.0, "busy": 0}

    def read(now: float) -> EnergyReading:
        return EnergyReading(state["j"], None, "rapl", "counter")

    meter = run_energy.RunEnergy(
        rapl=SimpleNamespace(read=read),  # type: ignore[arg-type]
        busy_ns=lambda: state["busy"],
    )
    meter._sampled_at -= run_energy.WINDOW_S  # a window's time has passed
    state["j"], state["busy"] = 50.0, MIN_SPLIT_NS // 2  # too little busy time to split
    with meter.call("cpu") as first:
        pass
    assert first.energy_j is None and meter.j_per_cpu_s is None
    meter._sampled_at -= run_energy.WINDOW_S
    state["j"], state["busy"] = 100.0, 4 * MIN_SPLIT_NS
    with meter.call("cpu") as second:
        spin(0.05)
    rate = 100.0 / (4 * MIN_SPLIT_NS / 1e9)
    assert meter.j_per_cpu_s == pytest.approx(rate)
    assert second.method == "rapl-oncpu"
    assert second.energy_j == pytest.approx(0.05 * rate, rel=0.2)


def test_the_cuda_variant_answers_as_the_cpu_or_says_there_is_no_gpu() -> None:
    x = inputs(np.random.default_rng(3), SMALL)
    try:
        from adaptyst_top.placement.kernels import CudaDevice

        CudaDevice()
    except Exception as e:  # no cupy or no GPU here: the variant must say so in one line
        with pytest.raises(PlacementError, match="no CUDA device on this worker") as err:
            dk.logistic_cuda(x)
        assert "\n" not in str(err.value) and str(e).splitlines()[0] in str(err.value)
        with pytest.raises(PlacementError):
            dk.warm("cuda")
        return
    assert dk.warm("cuda") and agrees(x, dk.logistic_cuda(x))


def test_a_call_made_ready_goes_only_to_a_kind_still_offered() -> None:
    """A chain a -> b submitted while a CUDA worker was there; the worker leaves before
    a's result is in: b is placed among the kinds offered when it is ready (on the
    scheduler's own records, faked: no GPU here)."""
    from types import SimpleNamespace

    from adaptyst_top.dask.placed import METADATA, VERSION, PlacedTask

    f = PlacedTask("spmv", {"cpu": lambda x: x, "cuda": lambda x: x})

    class Ts:
        def __init__(self, key: str, deps: tuple[Any, ...] = ()) -> None:
            self.key, self.state, self.dependencies = key, "released", set(deps)
            self.dependents: set[Any] = set()
            self.waiting_on = set(deps)
            self.run_spec = SimpleNamespace(func=f, dependencies={d.key for d in deps}, args=())
            self.run_spec.kwargs = {}
            self.annotations: Any = None
            self.resource_restrictions: Any = {"memory": 1}  # the user's own: kept
            self.nbytes = 8000
            for d in deps:
                d.dependents.add(self)

    gpu = {"tcp://127.0.0.1:2": 1}
    scheduler = SimpleNamespace(tasks={}, resources={"cuda": gpu}, workers={}, total_nthreads=2)
    plugin = DevicePlacement("time")
    plugin.scheduler = scheduler
    a = Ts("spmv-a-s1000")
    b = Ts("spmv-b", (a,))
    scheduler.tasks.update({a.key: a, b.key: b})
    plugin.update_graph(scheduler, tasks=[a.key, b.key])
    assert b.key in plugin.deferred and plugin.placements[b.key].pool == ("cpu", "cuda")
    scheduler.resources["cuda"] = {}  # the CUDA worker left
    a.state, b.state, b.waiting_on = "memory", "waiting", set()
    run = {"v": VERSION, "t": 0.01, "e": None, "how": None}
    plugin.transition(a.key, "processing", "memory", worker="x", metadata={METADATA: run})
    assert b.key not in plugin.deferred and plugin.placements[b.key].kind == "cpu"
    assert b.resource_restrictions == {"memory": 1}
    assert b.annotations["adaptyst"]["kind"] == "cpu" and plugin.placements[b.key].size == 8000
