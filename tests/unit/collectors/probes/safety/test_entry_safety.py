"""A probe never changes what its target computes: attach points whose first
instruction the kernel single-steps are allowed only for classes verified on this boot
(AVX-512 came out wrong here), and refused with a one-line reason otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.elf.elf_info import entry_bytes, read_elf
from adaptyst_top.collectors.probes.helpers.build import build_helper
from adaptyst_top.collectors.probes.safety import entry_safety as es


@pytest.mark.parametrize(
    ("code", "encoding"),
    [
        ("55", es.EMULATED),  # push %rbp
        ("f30f1efa", es.GP),  # endbr64
        ("488d4701", es.GP),  # lea 1(%rdi),%rax
        ("488b0500000000", es.GP_RIPREL),  # mov 0(%rip),%rax
        ("660f6ec7", es.SSE),  # movd %edi,%xmm0
        ("c5fe6f07", es.VEX),  # vmovdqu (%rdi),%ymm0
        ("62e27d287ace", es.EVEX),  # vpbroadcastb %esi,%ymm17 (glibc's __strchr_evex)
        ("d9ee", es.OTHER),  # fldz (x87)
        ("0f05", es.OTHER),  # syscall
        ("ffff", es.OTHER),  # not an instruction
    ],
)
def test_entry_instructions_are_classified(code: str, encoding: str) -> None:
    assert es.decode_entry(bytes.fromhex(code) + b"\x90" * 8).encoding == encoding


def test_the_policy_refuses_what_failed_or_was_never_verified() -> None:
    policy = es.EntryPolicy(
        {es.GP: es.Verdict("verified", "ok"), es.EVEX: es.Verdict("failed", "differed")}
    )
    evex = es.decode_entry(bytes.fromhex("62e27d287ace"))
    assert policy.refusal(es.decode_entry(bytes.fromhex("488d4701"))) is None
    assert "wrongly" in (policy.refusal(evex) or "")
    assert "unverified" not in (policy.refusal(evex) or "")
    assert "did not run" in (policy.refusal(es.decode_entry(bytes.fromhex("c5fe6f07"))) or "")
    assert policy.refusal(es.decode_entry(b"\x55")) is None  # emulated: never single-stepped
    line = es.refusal_line("strchr", evex, policy.refusal(evex) or "", ifunc=True)
    assert "\n" not in line and "strchr" in line and "vpbroadcastb" in line and "caller" in line


def test_check_target_entries_are_what_they_claim(tmp_path: Path) -> None:
    binary = build_helper("entry_check", tmp_path)
    fns = {f.name: f for f in read_elf(binary).functions}
    claims = {
        "chk_gp": es.GP,
        "chk_riprel": es.GP_RIPREL,
        "chk_sse": es.SSE,
        "chk_vex": es.VEX,
        "chk_evex": es.EVEX,
        "chk_evex_zmm": es.EVEX,
    }
    for name, encoding in claims.items():
        assert es.decode_entry(entry_bytes(str(binary), fns[name])).encoding == encoding, name
