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

from adaptyst_top.collectors.probes.debug_files import find_debug_file
from adaptyst_top.collectors.probes.elf_info import ElfInfo, FunctionSymbol, NotELFError, read_elf
from adaptyst_top.collectors.profile.cfi import cfi_for

ADDRESS = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
_CACHE: OrderedDict[tuple[tuple[int, int, int, int], bool], ElfInfo] = OrderedDict()
_LOCK = threading.Lock()


def with_debug_names(elf: ElfInfo, opened: str, shown: str, beside: bool) -> ElfInfo:
    """ELF with its debug file's functions added (ELF itself when it is not stripped or
    has none). OPENED: where its bytes are read; SHOWN: its path; BESIDE: its debug link
    may be looked for beside it (not where root plans for a user: that folder is theirs)."""
    if not elf.stripped:
        return elf
    key = (elf.identity, beside)
    with _LOCK:
        if (hit := _CACHE.get(key)) is not None:
            return hit
    folder = os.path.dirname(shown)
    debug = find_debug_file(opened, folder if beside else None, folder)
    merged = elf
    if debug is not None:
        try:
            names = read_elf(debug.path, debug=True)
        except (OSError, NotELFError, ValueError):
            names = None
        if names is not None:
            have = {f.address for f in elf.functions}
            extra = tuple(
                replace(f, file_offset=elf.offset_of(f.address), by_address=True, ifunc=False)
                for f in names.functions
                if f.address not in have and f.size > 0 and elf.offset_of(f.address) is not None
            )
            merged = replace(elf, functions=elf.functions + extra)
    with _LOCK:
        _CACHE[key] = merged
        while len(_CACHE) > 64:
            _CACHE.popitem(last=False)
    return merged


def function_at_address(elf: ElfInfo, glob: str, opened: str, shown: str) -> FunctionSymbol | None:
    """The function that starts at the address GLOB names: a symbol's, else the start of an
    entry of the unwind table (named `file+0xADDRESS`, as the profile names it); None when
    no function starts there (a probe mid-function could land inside an instruction)."""
    address = int(glob, 16)
    for f in elf.functions:
        if f.address == address and not f.ifunc:
            return f
    offset = elf.offset_of(address)
    if offset is None or cfi_for(opened).function_at(address) != address:
        return None
    base = shown.rsplit("/", 1)[-1]
    return FunctionSymbol(
        f"0x{address:x}", address, 0, offset, source=f"{base}+0x{address:x}", by_address=True
    )
