"""Calibration measures the classes on this machine (real probes, as root)."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.probes import overhead as ov
from adaptyst_top.collectors.probes.calibration import build_calibrator, calibrate
from adaptyst_top.collectors.probes.elf_info import entry_bytes, read_elf

from .bpf_objects import none_left
from .conftest import requires_root


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


@pytest.mark.ebpf
@requires_root
def test_calibration_measures_every_class(tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = calibrate(build_calibrator(tmp_path))
    for cls in (ov.USDT, "usdt-pair", ov.EMULATED, ov.SINGLESTEP):
        cost = table.get(cls)
        assert cost.source == "calibrated" and cost.per_hit_ns > 0, (cls, cost)
    # A single-stepped entry takes a second trap, so it is dearer than an emulated one
    # (4-7x here, fastest of 5 runs; the bound leaves room for a busy CI machine).
    assert table.get(ov.SINGLESTEP).per_hit_ns > 2 * table.get(ov.EMULATED).per_hit_ns
    # Part of each latency probe's cost lands inside the interval it measures.
    assert 0 < table.get(ov.EMULATED).in_interval_ns < table.get(ov.EMULATED).per_hit_ns
    assert none_left()
