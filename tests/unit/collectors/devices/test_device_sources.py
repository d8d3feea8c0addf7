"""The device sources' seam (collectors/devices/source.py): a new source is one class
and one line in SOURCES, and then the sweep reads it, `doctor` checks it and its help
names it, with nothing else edited (docs/extending.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from adaptyst_top.cli.doctor import doctor_parser
from adaptyst_top.collectors import doctor
from adaptyst_top.collectors.devices import sources
from adaptyst_top.collectors.devices.source import DeviceSource, SweepContext
from adaptyst_top.collectors.devices.sweep import DeviceSweep
from adaptyst_top.snapshot import DeviceReading, SourceState
from adaptyst_top.system.capability import Capability
from tests.support.fake_nvml import FakeNvml


def _check() -> Capability:
    return Capability("intel-gpu", "ok", "1 card (i915 sysfs)")


class IntelGpu(DeviceSource):
    """What an Intel GPU read through i915's sysfs would add: a stand-in here."""

    name = "intel-gpu"
    energy = ("hwmon",)
    checks = (("intel-gpu", _check),)

    def __init__(self, sysfs: Path) -> None:
        self.sysfs = sysfs

    @classmethod
    def build(cls, ctx: SweepContext) -> IntelGpu:
        return cls(ctx.sysfs)

    def read(self, now: float, found: Sequence[DeviceReading]) -> list[DeviceReading]:
        assert [d.id for d in found][:1] == ["cpu"]  # read after the sources before it
        return [DeviceReading(id="intel-gpu:0", kind="gpu", name="Arc A770", util=0.25)]

    def state(self) -> SourceState:
        return SourceState("intel-gpu", "ok", "")


def test_a_new_source_is_one_class_and_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sources, "SOURCES", (*sources.SOURCES, IntelGpu))
    sweep = DeviceSweep(sysfs=tmp_path, nvml=FakeNvml())
    readings = sweep.read(now=0.0)
    assert readings[-1].id == "intel-gpu:0" and readings[0].id == "cpu"
    assert ("intel-gpu", "ok") in [(s.name, s.state) for s in sweep.sources()]
    sweep.close()
    caps = {c.name: c for c in doctor.run_doctor(run_smoke=False)}
    assert caps["intel-gpu"].detail == "1 card (i915 sysfs)"
    assert "intel-gpu" in (doctor_parser().description or "")


def test_every_source_names_its_state_and_checks() -> None:
    names = [s.name for s in sources.SOURCES]
    assert len(set(names)) == len(names)
    for s in sources.SOURCES:
        assert s.checks, s.name
    sweep = DeviceSweep(nvml=FakeNvml())
    assert [st.name for st in sweep.sources()] == names
    sweep.close()
