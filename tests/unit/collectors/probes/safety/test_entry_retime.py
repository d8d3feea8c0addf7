"""Where a single-stepped entry's interval starts again: the first instruction after it
that the kernel emulates, reached by straight-line code and by no branch."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.engine.attach_plan import plan_function
from adaptyst_top.collectors.probes.safety.entry_retime import MAX_WALK, after_entry

LEA = bytes.fromhex("488d3f")  # lea (%rdi),%rdi: single-stepped
MOV = bytes.fromhex("4889f8")  # mov %rdi,%rax: single-stepped
PUSH = bytes.fromhex("55")  # push %rbp: emulated
RET = bytes.fromhex("c3")
ENDBR = bytes.fromhex("f30f1efa")


def jmp_to(at: int, target: int) -> bytes:
    """jmp rel32 at offset AT to offset TARGET."""
    return b"\xe9" + (target - (at + 5)).to_bytes(4, "little", signed=True)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (LEA + PUSH + RET, 3),  # the push
        (ENDBR + PUSH + RET, 4),  # -fcf-protection's prologue: past the endbr64
        (LEA + MOV + jmp_to(6, 0x40) + RET, 6),  # a direct jump is emulated
        (LEA + b"\x90" + RET, 3),  # the one-byte nop
        (LEA + RET, None),  # returns before anything emulated
        (LEA + bytes.fromhex("ffd0") + PUSH, None),  # call *%rax: not emulated, leaves
        (LEA + MOV * MAX_WALK + PUSH, None),  # too far
        (LEA + ov.NOP5 + RET, None),  # a nopl is single-stepped too
        (b"", None),
    ],
)
def test_after_entry(code: bytes, expected: int | None) -> None:
    assert after_entry(code) == expected


def test_a_branch_into_the_walk_takes_no_place() -> None:
    # A loop back to the push would hit the second probe every pass.
    body = LEA + PUSH + MOV + jmp_to(7, 3) + RET
    assert after_entry(body) is None
    # A branch to the entry itself is a new call: the place stands.
    assert after_entry(LEA + PUSH + MOV + jmp_to(7, 0) + RET) == 3


def test_not_x86() -> None:
    assert after_entry(LEA + PUSH, "aarch64") is None


def test_planned_with_its_second_place(tmp_path: Path) -> None:
    from adaptyst_top.collectors.probes.cost.calibration import build_calibrator

    binary = build_calibrator(tmp_path)
    elf = read_elf(binary)
    fn = {f.name: f for f in elf.functions}
    timed = plan_function(str(binary), elf, fn["cal_lea_nop"], lambda _i: None)
    start = fn["cal_lea_nop"].file_offset
    assert start is not None
    assert (timed.cost_class, timed.after) == (ov.SINGLESTEP_RETIMED, start + 4)
    stepped = plan_function(str(binary), elf, fn["cal_lea"], lambda _i: None)
    assert (stepped.cost_class, stepped.after) == (ov.SINGLESTEP, None)
    pushed = plan_function(str(binary), elf, fn["cal_push"], lambda _i: None)
    assert (pushed.cost_class, pushed.after) == (ov.EMULATED, None)
