"""The structs a probe module's programs and this package both read, declared once.

Each is a list of (member, C type) here. `structs.h`, which `module.h` and the kinds'
programs include, is generated from it (`python -m
adaptyst_top.collectors.probes.bpf.layouts`; a test holds the file to the generator's
output), and the Python side builds its ctypes structures (`ctype`) and bulk-parsing
formats (`struct_format`) from the same list. A test checks both against the compiled
objects' BTF, member by member.

C types: u8/u32/u64/s32/s64, `char`, `struct NAME` (another struct here, or
theirs.h's `confine_config`), each optionally `[N]` with N a number or one of the
header's sizes (KEYLEN, MAX_DEPTH).
"""

from __future__ import annotations

import ctypes as ct
import functools
import re
import sys
from typing import Any

from adaptyst_top.collectors.probes.bpf.program import KEYLEN, MAX_DEPTH
from adaptyst_top.collectors.probes.safety.confinement import ConfineConfig

SIZES = {"KEYLEN": KEYLEN, "MAX_DEPTH": MAX_DEPTH}
_SCALARS: dict[str, tuple[Any, str]] = {
    "u8": (ct.c_uint8, "B"),
    "u32": (ct.c_uint32, "I"),
    "s32": (ct.c_int32, "i"),
    "u64": (ct.c_uint64, "Q"),
    "s64": (ct.c_int64, "q"),
    "char": (ct.c_char, "s"),
}
# Declared in C elsewhere (theirs.h, shared with the follower and the profile's sampler).
_EXTERNAL: dict[str, type[ct.Structure]] = {"confine_config": ConfineConfig}

Member = tuple[str, str]

# name -> (what it is, its members); in dependency order (C declares them so).
STRUCTS: dict[str, tuple[str, tuple[Member, ...]]] = {
    "module_config": (
        "Set before load (read-only data: the verifier prunes what a module does not use). "
        "oncpu: 1 to measure each call's on-CPU time; oncpu_at: task_struct's se.exec_start, "
        "se.sum_exec_runtime side by side; keyed: 1 when a slot's key comes from slot_cfg; "
        "by_process: 1 to keep each process's statistics apart (an MPI job's ranks).",
        (
            ("confine", "struct confine_config"),
            ("oncpu", "u32"),
            ("oncpu_at", "u32"),
            ("keyed", "u32"),
            ("by_process", "u32"),
        ),
    ),
    "skey": (
        "A statistics key: its slot, what it holds (KEY_*), a number or a string; the "
        "process it counts (0: every process, unless cfg.by_process).",
        (
            ("slot", "u32"),
            ("kind", "u32"),
            ("num", "u64"),
            ("str", "char[KEYLEN]"),
            ("pid", "u32"),
            ("pad", "u32"),
        ),
    ),
    "stat": (
        "A key's statistics: calls, their total, least and most ns, on-CPU ns.",
        tuple((n, "u64") for n in ("count", "sum", "min", "max", "buckets", "oncpu")),
    ),
    "hkey": (
        "A histogram bucket's key.",
        (("k", "struct skey"), ("bucket", "u32"), ("pad", "u32")),
    ),
    "tkey": (
        "A thread's stack of open calls, per chain.",
        (("tid", "u64"), ("chain", "u32"), ("pad", "u32")),
    ),
    "frame": (
        "An open call. retimed: ts was taken again past a single-stepped entry "
        "(kinds/uprobe.bpf.c).",
        (
            ("ts", "u64"),
            ("sp", "u64"),
            ("se", "u64[2]"),
            ("cpu", "u32"),
            ("retimed", "u32"),
            ("k", "struct skey"),
        ),
    ),
    "stack": (
        "A thread's open calls.",
        (("depth", "u32"), ("over", "u32"), ("f", "struct frame[MAX_DEPTH]")),
    ),
    "slot_cfg": (
        "A slot: its @argN (0: none), how it is read, whether @retval; a USDT pair's chain, "
        "and the slot whose row (keys, gate) its hits are filed under.",
        tuple((n, "u32") for n in ("arg", "arg_type", "retval", "chain", "row", "pad")),
    ),
    "arg_loc": (
        "One USDT argument's place (kinds/usdt.bpf.c). reg, base, index: byte offsets into "
        "struct pt_regs (-1: none).",
        (
            ("kind", "u32"),
            ("size", "u32"),
            ("is_signed", "u32"),
            ("reg", "s32"),
            ("base", "s32"),
            ("index", "s32"),
            ("scale", "u32"),
            ("pad", "u32"),
            ("disp", "s64"),
            ("value", "u64"),
        ),
    ),
}

_TYPE = re.compile(r"(struct )?(\w+)(?:\[(\w+)\])?$")


def _parts(ctype_text: str) -> tuple[bool, str, int | None, str | None]:
    """(a struct?, its base name, its count or None, the count as written)."""
    m = _TYPE.match(ctype_text)
    if m is None:
        raise ValueError(f"not a member type: {ctype_text!r}")
    count = m.group(3)
    n = None if count is None else int(count) if count.isdigit() else SIZES[count]
    return bool(m.group(1)), m.group(2), n, count


@functools.cache
def ctype(name: str) -> type[ct.Structure]:
    """`struct NAME` as a ctypes structure."""
    if name in _EXTERNAL:
        return _EXTERNAL[name]
    fields: list[tuple[str, Any]] = []
    for member, text in STRUCTS[name][1]:
        is_struct, base, n, _ = _parts(text)
        t = ctype(base) if is_struct else _SCALARS[base][0]
        fields.append((member, t if n is None else t * n))
    return type(name, (ct.Structure,), {"_fields_": fields})


@functools.cache
def struct_format(name: str) -> str:
    """`struct NAME` as a `struct` module format, little-endian and flattened (every
    struct here is packed by hand: its pads are members)."""

    def flat(n: str) -> str:
        if n in _EXTERNAL:  # a struct of scalars declared in C elsewhere
            codes = {t: code for t, code in _SCALARS.values()}
            return "".join(codes[f[1]] for f in _EXTERNAL[n]._fields_)
        out = ""
        for _, text in STRUCTS[n][1]:
            is_struct, base, count, _ = _parts(text)
            if is_struct:
                out += flat(base) * (count or 1)
            elif base == "char":
                out += f"{count or 1}s"
            else:
                out += f"{count or ''}{_SCALARS[base][1]}"
        return out

    return "<" + flat(name)


def c_header() -> str:
    """structs.h, as generated."""
    lines = [
        "/* Generated from layouts.py (the one declaration both sides read): edit there, then",
        " *   python -m adaptyst_top.collectors.probes.bpf.layouts > structs.h",
        " * Included by module.h after KEYLEN, MAX_DEPTH and theirs.h. */",
        "#ifndef ADAPTYST_STRUCTS_H",
        "#define ADAPTYST_STRUCTS_H",
        "",
    ]
    for name, (what, members) in STRUCTS.items():
        lines.append(f"/* {what} */")
        body = []
        for member, text in members:
            is_struct, base, _, count = _parts(text)
            kind = f"struct {base}" if is_struct else base
            body.append(f"{kind} {member}{'' if count is None else f'[{count}]'};")
        lines.append(f"struct {name} {{ {' '.join(body)} }};")
    lines += ["", "#endif", ""]
    return "\n".join(_wrapped(lines))


def _wrapped(lines: list[str], width: int = 96) -> list[str]:
    """Comments wrapped to WIDTH; a struct's members over more lines where long."""
    out: list[str] = []
    for line in lines:
        if line.startswith("/* ") and len(line) > width and line.endswith(" */"):
            words, cur = line[3:-3].split(), "/*"
            for w in words:
                if len(cur) + 1 + len(w) > width - 3:
                    out.append(cur)
                    cur = " *"
                cur += " " + w
            out.append(cur + " */")
        elif line.startswith("struct ") and len(line) > width:
            head, _, rest = line.partition("{ ")
            members = rest[: -len(" };")].split("; ")
            out.append(head + "{")
            out += [f"    {m.rstrip(';')};" for m in members]
            out.append("};")
        else:
            out.append(line)
    return out


if __name__ == "__main__":
    sys.stdout.write(c_header())
