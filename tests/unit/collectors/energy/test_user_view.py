"""A user's view of energy through the agent (collectors/energy/user_view.py): no device power or
energy, no measured split, no idle joules; their own probes' and GPU processes' joules
refreshed at most once per ENERGY_PERIOD_S of the snapshots' clock."""

from __future__ import annotations

from adaptyst_top.collectors.energy.user_view import ENERGY_PERIOD_S, NODE_ENERGY_NOTE, OwnEnergy
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


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_no_node_wide_figure_reaches_a_user() -> None:
    clock = Clock()
    view = OwnEnergy(ENERGY_PERIOD_S, clock)
    view.apply(snap(1.0, 0.4, 90.0, 6.0))
    clock.t += ENERGY_PERIOD_S
    seen = view.apply(snap(2.0, 0.5, 100.0, 7.0))
    assert seen.energy_split == ()
    for d in seen.devices:
        assert (d.power_w, d.energy_j, d.energy_source, d.energy_method) == (None,) * 4
        assert d.note == NODE_ENERGY_NOTE and "idle_j" not in d.extra
    assert seen.probes[0].energy_j == 0.5
    assert seen.devices[1].extra["processes"] == [
        {"pid": 42, "mem_bytes": 1, "energy_j": 7.0},
        {"pid": 43, "mem_bytes": 2},
    ]


def test_own_joules_move_only_at_the_periods_boundaries() -> None:
    clock = Clock(0.0)
    period = 2.0
    view = OwnEnergy(period, clock)
    shown = []
    for i in range(70):  # a client asking ten times a second for 7 s
        clock.t = 0.05 + i * 0.1
        s = view.apply(snap(clock.t, probe_j=clock.t, device_j=10 * clock.t, proc_j=2 * clock.t))
        shown.append((clock.t, s.probes[0].energy_j))
    assert all(j is None for t, j in shown if t < period)  # nothing before a boundary
    changed = [t for (t, j), (_, before) in zip(shown[1:], shown, strict=False) if j != before]
    assert [round(t, 2) for t in changed] == [2.05, 4.05, 6.05], changed
    assert shown[-1][1] == 6.05  # what it was at the last boundary


def test_connections_in_other_phases_learn_nothing_finer() -> None:
    """Sixteen connections opened a tenth of a period apart all change at the same
    instants: the boundaries are the agent's clock's, not each connection's."""
    clock = Clock(0.0)
    views = [OwnEnergy(1.0, clock) for _ in range(16)]
    changes: set[float] = set()
    last: list[float | None] = [None] * 16
    for step in range(60):
        clock.t = step * 0.1 + 0.01
        for k, v in enumerate(views):
            if step < k:  # not opened yet
                continue
            j = v.apply(snap(clock.t, clock.t, 1.0, 1.0)).probes[0].energy_j
            if j != last[k]:
                changes.add(round(clock.t, 2))
                last[k] = j
    assert changes == {1.01, 2.01, 3.01, 4.01, 5.01}, sorted(changes)


def test_the_snapshot_given_is_never_changed() -> None:
    original = snap(1.0, 0.5, 100.0, 7.0)
    before = original.to_json()
    OwnEnergy(0.0).apply(original)
    assert original.to_json() == before
