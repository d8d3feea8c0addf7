"""Calibration measures the classes on this machine (real probes, as root)."""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.cost.calibration import build_calibrator
from adaptyst_top.collectors.probes.cost.table import CostTable
from adaptyst_top.collectors.probes.elf.elf_info import entry_bytes, read_elf
from tests.support.waits import wait_until


def test_classify_entry_instructions() -> None:
    assert ov.classify_entry(bytes([0x55, 0x48, 0x89, 0xE5])) == ov.EMULATED  # push %rbp
    assert ov.classify_entry(bytes([0x41, 0x57])) == ov.EMULATED  # push %r15
    assert ov.classify_entry(bytes([0x90])) == ov.EMULATED  # nop (a USDT site)
    assert ov.classify_entry(bytes([0xE9, 0, 0, 0, 0])) == ov.EMULATED  # jmp
    assert ov.classify_entry(bytes([0x48, 0x8D, 0x47, 0x01])) == ov.SINGLESTEP  # lea
    assert ov.classify_entry(bytes([0xF3, 0x0F, 0x1E, 0xFA])) == ov.SINGLESTEP  # endbr64
    assert ov.classify_entry(b"", "x86_64") == ov.UNKNOWN
    assert ov.classify_entry(b"\x55", "aarch64") == ov.UNKNOWN


def test_calibration_target_entries_are_what_they_claim(tmp_path) -> None:  # type: ignore[no-untyped-def]
    binary = build_calibrator(tmp_path)
    info = read_elf(binary)
    fn = {f.name: f for f in info.functions}
    assert ov.classify_entry(entry_bytes(str(binary), fn["cal_push"])) == ov.EMULATED
    assert ov.classify_entry(entry_bytes(str(binary), fn["cal_lea"])) == ov.SINGLESTEP
    assert {(u.provider, u.name) for u in info.usdt} >= {("adaptyst_cal", "hit")}


class FakeChild:
    """The calibration child as subprocess.Popen gives it: answers when told to."""

    started: ClassVar[list[FakeChild]] = []

    def __init__(self, argv: list[str], **_kw: object) -> None:
        self.returncode: int | None = None
        self.told = threading.Event()
        FakeChild.started.append(self)

    def communicate(self, timeout: float) -> tuple[str, str]:
        assert self.told.wait(timeout)
        out = '{"usdt": {"per_hit_ns": 7.0, "in_interval_ns": 0.0, "source": "calibrated"}}'
        return (out if self.returncode == 0 else "", "")

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self.returncode = -9
        self.told.set()

    def answer(self) -> None:
        self.returncode = 0
        self.told.set()


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[FakeChild]:
    from adaptyst_top.collectors.probes.cost import calibration

    FakeChild.started = []
    monkeypatch.setattr(calibration, "load_cached", lambda: None)
    monkeypatch.setattr(calibration.subprocess, "Popen", FakeChild)
    return FakeChild.started


def test_sessions_that_start_together_share_one_calibration_child(
    children: list[FakeChild],
) -> None:
    from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration

    tables = [CostTable() for _ in range(3)]
    runs = [BackgroundCalibration(t) for t in tables]
    wait_until(lambda: len(children) == 1)
    runs[0].close()  # one session gone: the others still wait on the child
    assert children[0].returncode is None
    children[0].answer()
    runs[1].wait(10)
    assert [t.costs["usdt"].per_hit_ns for t in tables[1:]] == [7.0, 7.0]
    assert tables[0].costs["usdt"].source != "calibrated"  # it had left
    assert len(children) == 1


def test_the_child_is_killed_when_its_last_session_closes(children: list[FakeChild]) -> None:
    from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration

    first, second = BackgroundCalibration(CostTable()), BackgroundCalibration(CostTable())
    wait_until(lambda: len(children) == 1)
    first.close()
    second.close()
    assert children[0].returncode == -9
    second.wait(10)
    third = BackgroundCalibration(CostTable())  # after the kill: a child of its own
    wait_until(lambda: len(children) == 2)
    children[1].answer()
    third.wait(10)
    assert third.table.costs["usdt"].per_hit_ns == 7.0
