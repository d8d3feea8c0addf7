"""Calibration measures the classes on this machine (real probes, as root)."""

from __future__ import annotations

from adaptyst_top.collectors.probes import overhead as ov
from adaptyst_top.collectors.probes.calibration import build_calibrator
from adaptyst_top.collectors.probes.elf_info import entry_bytes, read_elf


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
