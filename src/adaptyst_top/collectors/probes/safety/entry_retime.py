"""Where a single-stepped entry's interval starts: the first instruction after it that
the kernel emulates.

A uprobe on an instruction the kernel must single-step puts the trap's return, the copy
run out of line and the second trap inside the interval it opens: ~9 us here, and not
the same at every site (bench/README.md), so no one figure per class can be subtracted
to within 5% of a 20 us function. A second probe on the first instruction after the
entry that the kernel emulates (a push, a one-byte nop, a direct jump, call or
conditional jump), reached from the entry by straight-line code, starts the interval
again there: what remains inside it is an emulated hit's cost, the same at every site.

Only the first arrival there after the entry moves the start (kinds/uprobe.bpf.c), so a
loop that comes back later measures nothing wrong; it would cost a hit per pass, so a
place that any direct branch of the function lands on is not taken, nor is one in a
function of unknown size.
"""

from __future__ import annotations

import contextlib

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.safety.entry_safety import disassembler

MAX_WALK = 8  # instructions looked at past the entry
MAX_SCAN = 4096  # bytes of a function scanned for branches into the walk (its start)
# A spec of more functions is timed by its class's figure: a wide glob surveys counts, and
# each place costs a scan here (in the agent, for a user's file) and one more uprobe.
RETIME_MAX = 64
RETIMED = (ov.SINGLESTEP, ov.UNKNOWN)  # the classes whose entries get a second probe
_X86 = ("x86_64", "EM_X86_64")


def _transfers(insn: object) -> bool:
    """Whether INSN may go anywhere but the next instruction (Capstone's groups)."""
    import capstone  # type: ignore[import-untyped]

    groups = (capstone.CS_GRP_JUMP, capstone.CS_GRP_CALL, capstone.CS_GRP_RET)
    return any(insn.group(g) for g in (*groups, capstone.CS_GRP_INT, capstone.CS_GRP_IRET))  # type: ignore[attr-defined]


def _branch_targets(code: bytes) -> set[int]:
    """Offsets within CODE (a function's start) that its direct jumps and calls land on
    (a linear sweep without details, ~3x faster: what follows undecodable bytes is not
    seen, nor where a jump table leads: a loop there costs a hit a pass, never a wrong
    figure)."""
    out: set[int] = set()
    for _at, _size, mnemonic, operand in disassembler().disasm_lite(code, 0):
        if mnemonic[0] == "j" or mnemonic == "call":
            with contextlib.suppress(ValueError):  # an indirect one: a register or memory
                out.add(int(operand, 0))  # Capstone writes small targets in decimal
    return out


def after_entry(code: bytes, machine: str = "x86_64") -> int | None:
    """Bytes from a function's entry to where its interval starts again, or None (not
    x86-64, no such place within MAX_WALK instructions, a branch into the walk). CODE:
    the whole function from its entry (at most MAX_SCAN bytes)."""
    if machine not in _X86 or not code:
        return None
    at = 0
    for n, insn in enumerate(disassembler().disasm(code[: MAX_WALK * 15], 0)):
        if n > 0 and ov.classify_entry(code[insn.address :], machine) == ov.EMULATED:
            at = insn.address
            break
        if _transfers(insn) or n >= MAX_WALK:
            return None
    if at == 0:
        return None
    if any(0 < t <= at for t in _branch_targets(code)):
        return None
    return at


def function_code(path: str, offset: int | None, size: int) -> bytes:
    """A function's bytes from its entry, at most MAX_SCAN (b"": unknown size or place)."""
    if offset is None or size <= 0:
        return b""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(min(size, MAX_SCAN))
