"""DevicePlacement against a hostile client, on a real Dask cluster bound to 127.0.0.1:
a size() that sleeps holds nobody else's call (the scheduler never runs it), a flood of
task names leaves the scheduler's state within its cap, and runs forged through Dask
events (or through a placement annotation) teach the models nothing."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
from distributed import Client, get_worker  # noqa: E402

from adaptyst_top.dask import DevicePlacement, placed, placement_report  # noqa: E402
from adaptyst_top.dask.placed import ANNOTATION, METADATA, TOPIC, VERSION  # noqa: E402
from adaptyst_top.dask.plugin import MAX_NAMES, PLUGIN_NAME  # noqa: E402
from tests.system.dask.test_dask import cluster, worker  # noqa: E402

# A Dask scheduler and worker processes: as tests/system/dask/test_dask.py, in the system tier.

SLEEP_S = 5.0  # the hostile size(): what the scheduler used to wait for on every call


def trivial(x: int) -> int:
    return x + 1


def sleepy_size(*args: Any) -> int:
    time.sleep(SLEEP_S)
    return 1000


def latency(client: Client, i: int) -> float:
    """Seconds from submitting a trivial call to holding its result."""
    start = time.perf_counter()
    assert client.submit(trivial, i, pure=False).result(timeout=60) == i + 1
    return time.perf_counter() - start


def test_a_size_that_sleeps_holds_no_other_clients_call() -> None:
    with (
        cluster(gpu=worker({"opencl": 1}), plain=worker({"cpu": 1})) as c,
        Client(c) as honest,
        Client(c) as hostile,
    ):
        honest.register_plugin(DevicePlacement("time"))
        slow = placed("slowsize", {"cpu": trivial, "opencl": trivial}, size=sleepy_size)
        for i in range(3):  # connections and workers warm
            latency(honest, i)
        alone: list[float] = []
        beside: list[float] = []
        # Interleaved, so that what this shared machine does meanwhile falls on both.
        for i in range(8):
            time.sleep(0.05)
            alone.append(latency(honest, i))
            # A plain client.map: the scheduler sizes the calls itself, never by size().
            futures = hostile.map(slow, [i, i + 1], pure=False)
            time.sleep(0.05)  # its graph reaches the scheduler first
            beside.append(latency(honest, i))
            assert hostile.gather(futures) == [i + 1, i + 2]
        # Through PlacedTask.map size() runs on the hostile client, which waits for it.
        started = time.perf_counter()
        sent: list[Any] = []
        thread = threading.Thread(target=lambda: sent.extend(slow.map(hostile, [1])))
        thread.start()
        time.sleep(0.05)
        on_client = [latency(honest, i) for i in range(3)]
        thread.join(3 * SLEEP_S)
        assert time.perf_counter() - started >= SLEEP_S  # it did sleep, there
        assert hostile.gather(sent) == [2]
        report = placement_report(honest)
    base, near = statistics.median(alone), statistics.median(beside)
    print(
        f"honest call alone {1e3 * base:.1f} ms, beside the hostile size "
        f"{1e3 * near:.1f} ms, beside it on the client {1e3 * max(on_client):.1f} ms (max)"
    )
    assert near <= 2 * base, (alone, beside)
    assert max(on_client) < SLEEP_S / 5, on_client
    # The plain map's calls sized without size(); the other's by it, on the client.
    assert report["sizes"] == {"client": 1, "inputs": 0, "unknown": 16}


def identity(x: int) -> int:
    return x


def test_ten_thousand_names_leave_the_state_within_its_cap() -> None:
    names = 10_000
    with cluster(plain=worker({"cpu": 1})) as c, Client(c) as client:
        client.register_plugin(DevicePlacement("time"))
        tasks = [placed(f"n{i}", {"cpu": identity}, size=len) for i in range(names)]
        # One graph of 10,000 calls, each of its own task name. They wait for a resource
        # no worker has: placing them is what makes the state; running 10,000 distinct
        # functions would only measure Dask's own cost per function on two cores.
        calls = [dask.delayed(t, pure=False)(i) for i, t in enumerate(tasks)]
        futures = client.compute(calls, resources={"nowhere": 1})
        deadline = time.monotonic() + 120
        while placement_report(client)["placed"] < names and time.monotonic() < deadline:
            time.sleep(0.1)
        report = placement_report(client)

        def state(dask_scheduler: Any) -> dict[str, int]:
            plugin = dask_scheduler.plugins[PLUGIN_NAME]
            return {
                "names": len(plugin.names),
                "streams": sum(len(n.streams) for n in plugin.names.values()),
                "placements": len(plugin.placements),
            }

        held = client.run_on_scheduler(state)
        client.cancel(futures)
        del futures, calls
        deadline = time.monotonic() + 60  # the calls' keys forgotten, their records too
        while client.run_on_scheduler(state)["placements"] and time.monotonic() < deadline:
            time.sleep(0.1)
        after = client.run_on_scheduler(state)
    print(f"{names} names: {report['names']}, {held}, after release {after}")
    assert report["placed"] == names
    assert report["names"] == {"kept": MAX_NAMES, "cap": MAX_NAMES, "dropped": names - MAX_NAMES}
    assert held == {"names": MAX_NAMES, "streams": MAX_NAMES, "placements": names}
    assert len(report["tasks"]) == MAX_NAMES
    assert after["placements"] == 0


def test_the_cap_is_a_setting() -> None:
    with pytest.raises(ValueError, match="max_names 0 is not a count"):
        DevicePlacement(max_names=0)
    with cluster(plain=worker({"cpu": 1})) as c, Client(c) as client:
        client.register_plugin(DevicePlacement("time", max_names=3))
        for i in range(5):
            client.submit(placed(f"m{i}", {"cpu": identity}), i).result()
        # A call of a name forgotten while it runs comes back to nothing: not learnt.
        slow = client.submit(placed("m5", {"cpu": nap}), 0.5)
        later = [client.submit(placed(f"m{i}", {"cpu": identity}), i) for i in range(6, 9)]
        assert slow.result() == 0.5 and client.gather(later) == [6, 7, 8]
        report = placement_report(client)
        assert report["names"] == {"kept": 3, "cap": 3, "dropped": 6}
        assert [r["task"] for r in report["tasks"]] == ["m6", "m7", "m8"]
        assert report["ignored_events"] == 1


def nap(s: float) -> float:
    time.sleep(s)
    return s


def fast(x: float) -> float:
    return x


def slow_on_opencl(x: float) -> float:
    time.sleep(0.02)
    return x


def forge_metadata(x: float) -> float:
    """A hostile task's own measurement, claiming a run of the honest stream."""
    key = get_worker().state.tasks
    from dask.context import thread_state

    key[thread_state.key].metadata[METADATA] = {"v": VERSION, "t": 1e-6, "e": None, "how": None}
    return x


def test_forged_runs_leave_the_placement_as_it_was() -> None:
    with (
        cluster(gpu=worker({"opencl": 1}), plain=worker({"cpu": 1})) as c,
        Client(c) as honest,
        Client(c) as hostile,
    ):
        honest.register_plugin(DevicePlacement("time"))
        task = placed("honest", {"cpu": fast, "opencl": slow_on_opencl}, size=lambda x: 1000)
        for _ in range(12):  # learn: the CPU wins, OpenCL looked at
            assert honest.gather(task.map(honest, [0.5] * 4, pure=False)) == [0.5] * 4
        (before,) = placement_report(honest)["tasks"]
        assert before["device"] == "cpu", before
        sid = f"honest@{before['size_bucket']}"
        info = honest.scheduler_info()["workers"]
        gpu = next(a for a, w in info.items() if w["resources"].get("opencl"))
        plain = next(a for a in info if a != gpu)
        # 50 forged pairs, in this version's shape and the last's: OpenCL fast on the
        # real worker that offers it, the CPU slow on the other.
        forged = 0
        for v in (VERSION, 1):
            for _ in range(25):
                for kind, t, where in (("opencl", 1e-6, gpu), ("cpu", 1.0, plain)):
                    run = {"v": v, "stream": sid, "kind": kind, "explored": False, "size": 1000}
                    hostile.log_event(TOPIC, {**run, "t": t, "e": None, "worker": where})
                    forged += 1
        # A hostile task that claims the honest stream in its annotation, and its own
        # metadata a run of it: not one the scheduler placed, so nothing.
        claim = {"v": VERSION, "stream": sid, "kind": "opencl", "explored": False, "size": 1000}
        with dask.annotate(**{ANNOTATION: claim}):
            assert hostile.submit(forge_metadata, 0.5, pure=False).result() == 0.5
            # A placed task of its own, annotated the same: placed afresh, in its stream.
            own = placed("forger", {"cpu": forge_metadata, "opencl": forge_metadata})
            assert hostile.submit(own, 0.5, pure=False).result() == 0.5
        deadline = time.monotonic() + 30  # the events stored, so the plugins saw them
        while time.monotonic() < deadline:
            seen = [m for _, m in honest.get_events(TOPIC) if m.get("t") in (1e-6, 1.0)]
            if len(seen) >= forged:
                break
            time.sleep(0.1)
        assert len(seen) >= forged
        report = placement_report(honest)
        after = next(r for r in report["tasks"] if r["task"] == "honest")
        # The decision, and all it rests on, as it was without them.
        assert after == before
        assert honest.gather(task.map(honest, [0.5] * 4, pure=False)) == [0.5] * 4
        rows = {r["task"]: r for r in placement_report(honest)["tasks"]}
        assert rows["honest"]["device"] == "cpu"
        assert set(rows) == {"honest", "forger"}
    print(f"decision before forged events {before['device']}, after {after['device']}")
