"""The functions a uprobe spec may name in a stripped file beyond its exported ones: those
its separate debug file names (debug_files.py), and, by `0xADDRESS` (bpftrace's form, the
link-time address `nm` and `readelf` print), any function the file's symbols or its unwind
table (.eh_frame) say starts there. Either is attached at its address."""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from dataclasses import replace

from adaptyst_top.collectors.probes.elf.debug_files import read_debug_names
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, FunctionSymbol
from adaptyst_top.collectors.probes.elf.fde_starts import fde_starts, starts_function

ADDRESS = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
# A file's functions its debug file adds (never the caller's own: each caller merges its
# ElfInfo with them), by the file's identity and whether its folder was searched.
_EXTRA: OrderedDict[tuple[tuple[int, int, int, int], bool], tuple[FunctionSymbol, ...]] = (
    OrderedDict()
)
_LOCK = threading.Lock()


def with_debug_names(elf: ElfInfo, opened: str, shown: str, beside: bool) -> ElfInfo:
    """ELF with its debug file's functions added (ELF itself when it is not stripped or
    has none). OPENED: where its bytes are read; SHOWN: its path; BESIDE: its debug link
    may be looked for beside it."""
    if not elf.stripped:
        return elf
    key = (elf.identity, beside)
    with _LOCK:
        extra = _EXTRA.get(key)
    if extra is None:
        folder = os.path.dirname(shown)
        found = read_debug_names(opened, folder if beside else None, folder)
        have = {f.address for f in elf.functions}
        extra = tuple(
            replace(f, file_offset=elf.offset_of(f.address), by_address=True, ifunc=False)
            for f in (found[0].functions if found is not None else ())
            if f.address not in have and f.size > 0 and elf.offset_of(f.address) is not None
        )
        with _LOCK:
            _EXTRA[key] = extra
            while len(_EXTRA) > 64:
                _EXTRA.popitem(last=False)
    return replace(elf, functions=elf.functions + extra) if extra else elf


def function_at_address(elf: ElfInfo, glob: str, opened: str, shown: str) -> FunctionSymbol | None:
    """The function that starts at the address GLOB names: a symbol's, else the start of an
    entry of the file's unwind index (named `file+0xADDRESS`, as the profile names it);
    None when no function starts there (a probe mid-function could split an instruction).
    The index is read with bounded plain reads (root checks a user's file so)."""
    address = int(glob, 16)
    offset = elf.offset_of(address)
    try:
        fd = os.open(opened, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        starts = fde_starts(fd)
    except OSError:
        starts = None
    finally:
        os.close(fd)
    if offset is None or not starts_function(starts, address):
        # A symbol the file itself has (not a debug file's claim) needs no index.
        own = [f for f in elf.functions if f.address == address and not f.by_address]
        return own[0] if own and not own[0].ifunc else None
    for f in elf.functions:
        if f.address == address and not f.ifunc:
            return f
    base = shown.rsplit("/", 1)[-1]
    return FunctionSymbol(
        f"0x{address:x}", address, 0, offset, source=f"{base}+0x{address:x}", by_address=True
    )
