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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.probes.bpf.layouts import ctype
from adaptyst_top.collectors.probes.bpf.libbpf import BPF_TRACE_UPROBE_MULTI, BpfObject
from adaptyst_top.collectors.probes.bpf.program import (
    ARG_TYPES,
    KEYLEN,
    MAX_THREADS,
    MULTI_AFTER,
    MULTI_ENTRY,
    MULTI_RETURN,
    WHOLE_LEN,
    WHOLE_NAMES,
    KernelError,
    Slot,
    map_sizes,
)
from adaptyst_top.collectors.probes.elf.usdt_args import UsdtArg
from adaptyst_top.collectors.probes.safety.confinement import (
    Confinement,
    confine_config,
)

KINDS = Path(__file__).resolve().parents[1] / "kinds"
BPF_F_NO_PREALLOC = 1
ENTRY, RETURN = "at_entry", "at_return"  # one program each, the cookie is the slot
# Each object's programs; a USDT slot's role names its program.
_ROLES = {
    "usdt-count": "usdt_count",
    "usdt-begin": "usdt_begin",
    "usdt-end": "usdt_end",
    "usdt-batch": "usdt_batch",
    "usdt-add": "usdt_add",
    "usdt-name": "usdt_name",
}
# Every object's: a thread's interval stacks go with the thread (module.h).
EXIT = "module_exit"
# An interval's start taken again past a single-stepped entry (kinds/uprobe.bpf.c).
AFTER = "at_after"
OBJECTS: dict[str, tuple[str, ...]] = {
    "uprobe.bpf.o": (ENTRY, RETURN, AFTER, MULTI_ENTRY, MULTI_RETURN, MULTI_AFTER, EXIT),
    "usdt.bpf.o": (*_ROLES.values(), EXIT),
}
NO_ARGS = 0xFFFFFFFF  # a USDT cookie's high half: the site reads no argument
LOC_CONST, LOC_REG, LOC_MEM = 1, 2, 3
# struct pt_regs (x86-64): where each register usdt_args names is kept.
_PT_REGS = (
    *("r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx"),
    *("dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss"),
)

_u8, _u32, _u64 = ct.c_uint8, ct.c_uint32, ct.c_uint64


# The structs both sides read, from their one declaration (layouts.py).
SKey, Stat, HKey, TKey = ctype("skey"), ctype("stat"), ctype("hkey"), ctype("tkey")
Frame, Stack, SlotCfg, ArgLoc = ctype("frame"), ctype("stack"), ctype("slot_cfg"), ctype("arg_loc")
ModuleConfig = ctype("module_config")


def arg_loc(a: UsdtArg) -> ct.Structure:
    def at(reg: str | None) -> int:
        return -1 if reg is None else 8 * _PT_REGS.index(reg)

    loc = ArgLoc(0, a.size, int(a.signed), -1, -1, -1, a.scale, 0, a.disp, 0)
    if a.const is not None:
        loc.kind, loc.value = LOC_CONST, a.const & ((1 << 64) - 1)
    elif a.reg is not None:
        loc.kind, loc.reg = LOC_REG, at(a.reg)
    else:
        loc.kind, loc.base, loc.index = LOC_MEM, at(a.base), at(a.index)
    return loc


@dataclass
class CorePlan:
    """What a module's slots become in a precompiled object: each program name of the
    plan (bcc's, one per slot and reader) as (the object's program, its attach cookie),
    and the USDT argument places the cookies point into."""

    programs: dict[str, tuple[str, int]] = field(default_factory=dict)
    locs: list[ct.Structure] = field(default_factory=list)
    retimed: bool = False  # a slot's interval starts past its single-stepped entry


def core_plan(slots: list[Slot]) -> CorePlan:
    plan = CorePlan()
    for s in slots:
        if s.role == "uprobe-entry":
            plan.programs[s.fn_name] = (ENTRY, s.index)
            plan.programs[s.ret_fn_name] = (RETURN, s.index)
            if s.retimed:
                plan.programs[s.after_fn_name] = (AFTER, s.index)
                plan.retimed = True
            continue
        program = _ROLES[s.role]
        places = [s.args] if s.args else [(r,) for r in s.readers]
        if not places:
            plan.programs[s.fn_name] = (program, s.index | NO_ARGS << 32)
        for j, locs in enumerate(places):
            plan.programs[s.variant_name(j)] = (program, s.index | len(plan.locs) << 32)
            plan.locs += [arg_loc(a) for a in locs]
    return plan


MAP_TYPES: dict[str, tuple[Any, Any]] = {
    "stats": (SKey, Stat),
    "hist": (HKey, _u64),
    "stacks": (TKey, Stack),
    "stack_init": (_u32, Stack),
    "errors": (_u32, _u64),
    "gate": (_u32, _u8),
    "slots": (_u32, SlotCfg),
    "args": (_u32, ArgLoc),
    "names": (_u8 * KEYLEN, _u8 * WHOLE_LEN),
}


def config(
    confine: Confinement | None, oncpu_at: int | None, keyed: bool, by_process: bool = False
) -> ct.Structure:
    c = ModuleConfig(confine_config(confine))
    if oncpu_at is not None:
        c.oncpu, c.oncpu_at = 1, oncpu_at
    c.keyed = int(keyed)
    c.by_process = int(by_process)
    return c


def load_module(
    object_name: str,
    slots: list[Slot],
    multi: bool,
    confine: Confinement | None,
    oncpu_at: int | None,
    plan: CorePlan | None = None,
    by_process: bool = False,
) -> BpfObject:
    """The kind's object loaded for SLOTS (MULTI: its multi-link programs instead of the
    single ones; PLAN: core_plan(SLOTS); BY_PROCESS: each process's statistics apart).
    LibbpfError (an OSError) when libbpf or the kernel refuses."""
    plan = plan or core_plan(slots)
    programs = OBJECTS[object_name]
    obj = BpfObject(str(KINDS / object_name), programs, MAP_TYPES)
    try:
        keyed = any(s.keyed for s in slots)
        per_slot = keyed or any(s.role != "uprobe-entry" for s in slots)
        max_keys, hist_entries = map_sizes(slots, by_process)
        flags = BPF_F_NO_PREALLOC if keyed or by_process else 0
        obj.size_map("stats", max_keys, flags)
        obj.size_map("hist", hist_entries, flags)
        obj.size_map("stacks", MAX_THREADS)
        obj.size_map("errors", len(KernelError))
        obj.size_map("gate", len(slots))
        obj.size_map("slots", len(slots))
        if "args" in (names := obj.map_names()):
            obj.size_map("args", len(plan.locs))
        if "names" in names:
            told = any(s.role == "usdt-name" for s in slots)
            obj.size_map("names", WHOLE_NAMES if told else 1)
        obj.set_rodata(bytes(config(confine, oncpu_at, per_slot, by_process)))
        if multi:
            multi_type = BPF_TRACE_UPROBE_MULTI
            multis = (MULTI_ENTRY, MULTI_RETURN) + ((MULTI_AFTER,) if plan.retimed else ())
            obj.select(dict.fromkeys(multis, multi_type) | {EXIT: None})
        else:
            obj.select(dict.fromkeys([*{p for p, _ in plan.programs.values()}, EXIT]))
        obj.load()
        for s in slots if per_slot else ():
            row = s.index if s.files_as is None else s.files_as
            cfg = SlotCfg(s.arg or 0, ARG_TYPES[s.arg_type], int(s.retval), s.chain, row, 0)
            obj["slots"][_u32(s.index)] = cfg
        for i, loc in enumerate(plan.locs if "args" in names else ()):
            obj["args"][_u32(i)] = loc
    except BaseException:
        obj.cleanup()
        raise
    return obj
