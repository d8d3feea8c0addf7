"""A user's view of energy through the agent (agent/core/own_energy.py): no device power or
energy, no measured split, no idle joules; their own probes' and GPU processes' joules
refreshed at most once per ENERGY_PERIOD_S of the snapshots' clock."""

from __future__ import annotations

from adaptyst_top.agent.core.own_energy import ENERGY_PERIOD_S, NODE_ENERGY_NOTE, OwnEnergy
from adaptyst_top.snapshot import DeviceReading, ProbeEntry, Snapshot
from adaptyst_top.snapshot.probes import EnergySplit


def snap(t: float, probe_j: float, device_j: float, proc_j: float) -> Snapshot:
    probe = ProbeEntry(
        group=0, id=0, spec="uprobe:/bin/x:f", name="f", kind="uprobe", state="attached",
        count=3, energy_j=probe_j, energy_method="rapl-oncpu",
    )  # fmt: skip
    cpu = DeviceReading(id="cpu", kind="cpu", name="CPU", power_w=37.0, energy_j=device_j,
                        energy_source="rapl", energy_method="counter")  # fmt: skip
    gpu = DeviceReading(
        id="gpu0", kind="gpu", name="H200", power_w=300.0, energy_j=device_j * 3,
        energy_source="nvml", extra={"idle_j": 5.0, "processes": [
            {"pid": 42, "mem_bytes": 1, "energy_j": proc_j}, {"pid": 43, "mem_bytes": 2}]},
    )  # fmt: skip
    split = (EnergySplit("cpu", "rapl-oncpu", device_j, probe_j),)
    return Snapshot(t=t, host="n", probes=(probe,), devices=(cpu, gpu), energy_split=split)


def test_no_node_wide_figure_reaches_a_user() -> None:
    seen = OwnEnergy().apply(snap(1.0, 0.5, 100.0, 7.0))
    assert seen.energy_split == ()
    for d in seen.devices:
        assert (d.power_w, d.energy_j, d.energy_source, d.energy_method) == (None,) * 4
        assert d.note == NODE_ENERGY_NOTE and "idle_j" not in d.extra
    assert seen.probes[0].energy_j == 0.5
    assert seen.devices[1].extra["processes"] == [
        {"pid": 42, "mem_bytes": 1, "energy_j": 7.0},
        {"pid": 43, "mem_bytes": 2},
    ]


def test_own_joules_move_at_most_once_a_period() -> None:
    view = OwnEnergy()
    step = ENERGY_PERIOD_S / 10
    shown = []
    for i in range(35):  # a client asking ten times a period
        t = 1.0 + i * step
        s = view.apply(snap(t, probe_j=t, device_j=10 * t, proc_j=2 * t))
        shown.append((s.probes[0].energy_j, s.devices[1].extra["processes"][0]["energy_j"]))
    changes = [i for i in range(1, len(shown)) if shown[i] != shown[i - 1]]
    assert len(changes) == 3, shown  # 3.4 periods: three refreshes after the first
    assert all(b - a >= 9 for a, b in zip([0, *changes], changes, strict=False)), changes
    assert shown[0] == (1.0, 2.0)


def test_a_clock_that_starts_again_refreshes_at_once() -> None:
    view = OwnEnergy()
    view.apply(snap(50.0, 9.0, 1.0, 1.0))
    assert view.apply(snap(0.5, 0.1, 1.0, 1.0)).probes[0].energy_j == 0.1  # a new session


def test_the_snapshot_given_is_never_changed() -> None:
    original = snap(1.0, 0.5, 100.0, 7.0)
    before = original.to_json()
    OwnEnergy().apply(original)
    assert original.to_json() == before
