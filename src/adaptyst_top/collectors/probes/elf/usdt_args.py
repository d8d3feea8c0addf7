"""A USDT argument's location, as the SystemTap SDT note spells it on x86-64
(`-4@%eax`, `8@-16(%rbp)`, `8@(%rax,%rdx,8)`, `4@$5`), turned into the BPF C that
reads it into `v`. bcc's USDT contexts did this by parsing the notes again, as root,
in the process that loads the program; here the notes were read once (for the agent's
users, by their own worker) and each argument is checked against one anchored pattern,
in time linear in its length. What it does not match is refused, in one line.

Not read: a location relative to the instruction pointer (a global, `foo(%rip)`) or a
segment (`%fs:8`): rare in SDT notes (none in Debian 12's libraries here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each x86-64 register name SDT notes use, as struct pt_regs names its slot.
_REGS = {
    **{f"%{p}": "ax" for p in ("rax", "eax", "ax", "al")},
    **{f"%{p}": "bx" for p in ("rbx", "ebx", "bx", "bl")},
    **{f"%{p}": "cx" for p in ("rcx", "ecx", "cx", "cl")},
    **{f"%{p}": "dx" for p in ("rdx", "edx", "dx", "dl")},
    **{f"%{p}": "si" for p in ("rsi", "esi", "si", "sil")},
    **{f"%{p}": "di" for p in ("rdi", "edi", "di", "dil")},
    **{f"%{p}": "bp" for p in ("rbp", "ebp", "bp", "bpl")},
    **{f"%{p}": "sp" for p in ("rsp", "esp", "sp", "spl")},
    **{f"%r{n}{s}": f"r{n}" for n in range(8, 16) for s in ("", "d", "w", "b")},
}
_REG = r"%[a-z0-9]{2,4}"
_NUM = r"-?(?:0x[0-9a-fA-F]{1,16}|[0-9]{1,20})"
_ARG = re.compile(
    rf"^(?P<sign>-?)(?P<size>[1248])@(?:"
    rf"\$(?P<const>{_NUM})"
    rf"|(?P<reg>{_REG})"
    rf"|(?P<disp>{_NUM})?\((?P<base>{_REG})(?:,(?P<index>{_REG})(?:,(?P<scale>[1248]))?)?\)"
    rf")$"
)
_C_TYPES = {1: "8", 2: "16", 4: "32", 8: "64"}


class ArgError(ValueError):
    """Why an argument's location is not read, in one line."""


@dataclass(frozen=True)
class UsdtArg:
    size: int  # bytes: 1, 2, 4 or 8
    signed: bool
    const: int | None = None
    reg: str | None = None  # pt_regs' name: the value is in the register
    base: str | None = None  # pt_regs' name: the value is in memory at base+disp(+index*scale)
    disp: int = 0
    index: str | None = None
    scale: int = 1


def parse_arg(text: str) -> UsdtArg:
    """TEXT (one argument of an SDT note) as a location; ArgError when it is not one
    this reads."""
    if len(text) > 80 or (m := _ARG.match(text)) is None:
        raise ArgError(f"the location {text[:80]!r} is not one this tool reads")
    size, signed = int(m["size"]), m["sign"] == "-"
    if m["const"] is not None:
        return UsdtArg(size, signed, const=_int(m["const"]))
    if m["reg"] is not None:
        return UsdtArg(size, signed, reg=_reg(m["reg"], text))
    index = m["index"] and _reg(m["index"], text)
    return UsdtArg(
        size,
        signed,
        base=_reg(m["base"], text),
        disp=_int(m["disp"] or "0"),
        index=index or None,
        scale=int(m["scale"] or 1),
    )


def _int(text: str) -> int:
    value = int(text, 0)
    if not -(1 << 63) <= value < (1 << 64):
        raise ArgError(f"the number {text} does not fit 64 bits")
    return value


def _reg(name: str, text: str) -> str:
    if (reg := _REGS.get(name)) is None:
        raise ArgError(f"the location {text!r} names {name}, which this tool does not read")
    return reg


def reader(arg: UsdtArg) -> str:
    """C statements that leave the argument in `u64 v` (declared by the caller), widened
    as its size and sign say; a read of user memory that fails leaves 0."""
    bits = _C_TYPES[arg.size]
    if arg.const is not None:
        load = f"v = (u64){arg.const & ((1 << 64) - 1):#x}ULL;"
    elif arg.reg is not None:
        load = f"v = ctx->{arg.reg};"
    else:
        address = f"ctx->{arg.base} + ({arg.disp}LL)"
        if arg.index is not None:
            address += f" + ctx->{arg.index} * {arg.scale}"
        load = (
            f"{{ u{bits} t = 0; bpf_probe_read_user(&t, sizeof(t), (void *)({address})); v = t; }}"
        )
    widen = f"v = (u64)(s64)(s{bits})v;" if arg.signed else f"v = (u64)(u{bits})v;"
    return load if arg.size == 8 else f"{load} {widen}"
