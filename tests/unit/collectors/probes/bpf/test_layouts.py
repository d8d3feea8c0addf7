"""The structs both sides of a probe module read are declared once (bpf/layouts.py):
structs.h is what the generator writes, and the ctypes structures and bulk formats built
from the list lay out each struct as the compiled objects' BTF says, member by member."""

from __future__ import annotations

import ctypes as ct
import struct

import pytest

from adaptyst_top.collectors.probes.bpf import layouts
from adaptyst_top.collectors.probes.bpf.ebpf_env import PACKAGE
from adaptyst_top.collectors.probes.bpf.kernel_btf import struct_layout

HEADER = PACKAGE / "collectors" / "probes" / "bpf" / "structs.h"
OBJECTS = {
    name: PACKAGE / "collectors" / "probes" / "kinds" / f"{kind}.bpf.o"
    for kind in ("uprobe", "usdt")
    for name in layouts.STRUCTS
    if kind == "usdt" or name != "arg_loc"  # arg_loc is the USDT program's alone
}


def test_structs_h_is_the_generators_output() -> None:
    assert HEADER.read_text() == layouts.c_header(), (
        f"structs.h is stale: python -m adaptyst_top.collectors.probes.bpf.layouts > {HEADER}"
    )


@pytest.mark.parametrize("name", [*layouts.STRUCTS, "confine_config"])
def test_each_struct_is_laid_out_as_the_compiled_objects_say(name: str) -> None:
    """Theirs.h's confine_config too: declared in C for the follower and the sampler,
    mirrored by confinement.py, checked here like the rest."""
    obj = OBJECTS.get(name, OBJECTS["skey"])
    size, members = struct_layout(str(obj), name)
    cls = layouts.ctype(name)
    assert ct.sizeof(cls) == size
    assert {m: getattr(cls, m).offset for m, _ in cls._fields_} == members
    assert struct.calcsize(layouts.struct_format(name)) == size


def test_the_bulk_format_reads_what_ctypes_writes() -> None:
    key = layouts.ctype("hkey")()
    key.k.slot, key.k.kind, key.k.num, key.k.str, key.k.pid, key.bucket = 3, 2, 7, b"gemm", 9, 41
    fmt = layouts.struct_format("hkey")
    slot, kind, num, text, pid, kpad, bucket, pad = struct.unpack(fmt, bytes(key))
    assert (slot, kind, num, text.rstrip(b"\0"), pid, kpad, bucket, pad) == (
        3,
        2,
        7,
        b"gemm",
        9,
        0,
        41,
        0,
    )
