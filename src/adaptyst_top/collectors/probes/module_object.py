"""A probe module from a program compiled with the package (`kinds/<kind>.bpf.o`, C in
`bpf/module.h` and the kind's `.bpf.c`): sized, told whose processes count and where the
kernel keeps what it reads, loaded by libbpf. No compiler and no kernel headers: the
offsets come from the running kernel's BTF (kernel_btf.py), set as read-only data before
load, where the verifier sees them as constants.

The layouts below mirror `bpf/module.h`; a map whose key or value size differs from
them is refused at load (libbpf.Map), so the two cannot drift apart unseen.
"""

from __future__ import annotations

import ctypes as ct
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.probes.bpf_program import (
    KEYLEN,
    MAX_DEPTH,
    MAX_THREADS,
    MULTI_ENTRY,
    MULTI_RETURN,
    KernelError,
    Slot,
    map_sizes,
)
from adaptyst_top.collectors.probes.confinement import ConfineConfig, Confinement, confine_config
from adaptyst_top.collectors.probes.libbpf import BPF_TRACE_UPROBE_MULTI, BpfObject

KINDS = Path(__file__).resolve().parent / "kinds"
BPF_F_NO_PREALLOC = 1
ENTRY, RETURN = "at_entry", "at_return"  # one program each, the cookie is the slot
PROGRAMS = (ENTRY, RETURN, MULTI_ENTRY, MULTI_RETURN)

_u8, _u32, _u64 = ct.c_uint8, ct.c_uint32, ct.c_uint64


class SKey(ct.Structure):
    _fields_ = [("slot", _u32), ("kind", _u32), ("num", _u64), ("str", ct.c_char * KEYLEN)]


class Stat(ct.Structure):
    _fields_ = [(n, _u64) for n in ("count", "sum", "min", "max", "buckets", "oncpu")]


class HKey(ct.Structure):
    _fields_ = [("k", SKey), ("bucket", _u32), ("pad", _u32)]


class TKey(ct.Structure):
    _fields_ = [("tid", _u64), ("chain", _u32), ("pad", _u32)]


class Frame(ct.Structure):
    _fields_ = [
        ("ts", _u64),
        ("sp", _u64),
        ("se", _u64 * 2),
        ("cpu", _u32),
        ("pad", _u32),
        ("k", SKey),
    ]


class Stack(ct.Structure):
    _fields_ = [("depth", _u32), ("over", _u32), ("f", Frame * MAX_DEPTH)]


class SlotCfg(ct.Structure):
    _fields_ = [("arg", _u32), ("arg_type", _u32), ("retval", _u32), ("pad", _u32)]


class ModuleConfig(ct.Structure):
    _fields_ = [
        ("confine", ConfineConfig),
        ("oncpu", _u32),
        ("oncpu_at", _u32),
        ("keyed", _u32),
        ("pad", _u32),
    ]


MAP_TYPES: dict[str, tuple[Any, Any]] = {
    "stats": (SKey, Stat),
    "hist": (HKey, _u64),
    "stacks": (TKey, Stack),
    "stack_init": (_u32, Stack),
    "errors": (_u32, _u64),
    "gate": (_u32, _u8),
    "slots": (_u32, SlotCfg),
}

_ARG_TYPES = {"auto": 0, "int": 1, "str": 2}  # bpf_program.ArgType


def config(confine: Confinement | None, oncpu_at: int | None, keyed: bool) -> ModuleConfig:
    c = ModuleConfig(confine_config(confine))
    if oncpu_at is not None:
        c.oncpu, c.oncpu_at = 1, oncpu_at
    c.keyed = int(keyed)
    return c


def load_module(
    object_name: str,
    slots: list[Slot],
    multi: bool,
    confine: Confinement | None,
    oncpu_at: int | None,
) -> BpfObject:
    """The kind's object loaded for SLOTS (MULTI: its multi-link programs instead of the
    single ones). LibbpfError (an OSError) when libbpf or the kernel refuses."""
    obj = BpfObject(str(KINDS / object_name), PROGRAMS, MAP_TYPES)
    try:
        keyed = any(s.keyed for s in slots)
        max_keys, hist_entries = map_sizes(slots)
        flags = BPF_F_NO_PREALLOC if keyed else 0
        obj.size_map("stats", max_keys, flags)
        obj.size_map("hist", hist_entries, flags)
        obj.size_map("stacks", MAX_THREADS)
        obj.size_map("errors", len(KernelError))
        obj.size_map("gate", len(slots))
        obj.size_map("slots", len(slots))
        obj.set_rodata(bytes(config(confine, oncpu_at, keyed)))
        if multi:
            obj.select({MULTI_ENTRY: BPF_TRACE_UPROBE_MULTI, MULTI_RETURN: BPF_TRACE_UPROBE_MULTI})
        else:
            obj.select({ENTRY: None, RETURN: None})
        obj.load()
        table = obj["slots"]
        for s in slots if keyed else ():
            arg = s.arg or 0
            table[_u32(s.index)] = SlotCfg(arg, _ARG_TYPES[s.arg_type], int(s.retval), 0)
    except BaseException:
        obj.cleanup()
        raise
    return obj
