"""A sample's user stack, unwound from its registers and a copy of the stack's top: each
frame's caller found from the call-frame rules of the code it runs (cfi.py), from the
frame pointer where a function has no rule, and named by the symbols of its file."""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from adaptyst_top.collectors.probes.demangle import name_of
from adaptyst_top.collectors.probes.elf_info import ElfInfo
from adaptyst_top.collectors.profile.cfi import RSP, Rule
from adaptyst_top.collectors.profile.maps import ProcessMaps
from adaptyst_top.snapshot.inert import has_unsafe, inert
from adaptyst_top.snapshot.profile import EH_FRAME

MAX_FRAMES = 128
MAX_NAME = 4096  # characters of a function's or a file's name kept
UNKNOWN = "[unknown]"
_WORD = struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class Frame:
    module: str  # the file's path as the process maps it ("" for anonymous memory)
    name: str  # the function as its source names it, or "[file]" where none is known
    symbol: str = ""  # what a uprobe attaches to: a symbol, or 0xADDRESS; "" where none
    named_by: str = ""  # where the name came from (snapshot.profile.SYMTAB...); "" where none
    line: int = 0  # a Python function's: the line of its definition


@dataclass(frozen=True, slots=True)
class Stack:
    """Frames leaf first; COMPLETE when the unwind reached the outermost frame (its
    return address undefined, or zero) rather than a frame it could not follow."""

    frames: tuple[Frame, ...]
    complete: bool


class Symbols:
    """Function names of one file by link-time address."""

    def __init__(self, elf: ElfInfo) -> None:
        funcs = sorted((f for f in elf.functions if f.size > 0), key=lambda f: f.address)
        self._starts = [f.address for f in funcs]
        self._funcs = funcs

    def name(self, vaddr: int) -> tuple[str, str] | None:
        """(the name as its source spells it, the symbol) of the function at VADDR."""
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i >= 0:
            f = self._funcs[i]
            if vaddr < f.address + f.size:
                return name_of(f.name, f.source).display, f.name
        return None


_SYMBOLS: dict[tuple[int, int, int, int], Symbols] = {}


def _symbols(elf: ElfInfo) -> Symbols:
    s = _SYMBOLS.get(elf.identity)
    if s is None:
        if len(_SYMBOLS) >= 256:
            _SYMBOLS.pop(next(iter(_SYMBOLS)))
        s = _SYMBOLS[elf.identity] = Symbols(elf)
    return s


MAX_PLACES = 65536  # addresses a process's frames and rules are kept for


def _place(maps: ProcessMaps, look: int) -> tuple[Frame, Rule | None] | None:
    """The frame at address LOOK (its file and function) and the rule that finds its
    caller; None outside every mapping."""
    m = maps.find(look)
    if m is None:
        return None
    elf = maps.elf(m)
    vaddr = maps.vaddr(m, look, elf) if elf is not None else None
    base = m.path.rsplit("/", 1)[-1] or "anon"
    named, named_by = None, ""
    if elf is not None and vaddr is not None:
        names, named_by = maps.symbols_elf(m, elf)
        named = _symbols(names).name(vaddr)
    # Names and paths are the target's bytes: shown, never acted on by a terminal.
    path = inert(m.path)[:MAX_NAME]
    table = maps.cfi(m)
    if named:
        # A name past MAX_NAME (a template's) is cut; a symbol that is not plain text, or
        # is that long, is none a probe could be given: "" (no `u` on it).
        symbol = named[1] if len(named[1]) <= MAX_NAME and not has_unsafe(named[1]) else ""
        frame = Frame(path, inert(named[0])[:MAX_NAME], symbol, named_by)
    elif vaddr is not None and (start := table.function_at(vaddr)) is not None:
        # No symbol: the function its unwind table says holds the address, by its start
        # (one row per function, not per address; a uprobe spec can name it).
        frame = Frame(path, inert(f"{base}+0x{start:x}")[:MAX_NAME], f"0x{start:x}", EH_FRAME)
    else:
        frame = Frame(path, inert(base if base[0] == "[" else f"[{base}]")[:MAX_NAME])
    return frame, table.find(vaddr) if vaddr is not None else None


def unwind(maps: ProcessMaps, ip: int, sp: int, bp: int, stack: bytes) -> Stack:
    """The frames of a thread stopped at IP with SP and BP, STACK the bytes from SP up."""

    def word(addr: int) -> int | None:
        i = addr - sp
        if 0 <= i <= len(stack) - 8:
            return int(_WORD.unpack_from(stack, i)[0])
        return None

    frames: list[Frame] = []
    pc, csp, cbp = ip, sp, bp
    for depth in range(MAX_FRAMES):
        # A caller's address is a return address: the call lies just before it.
        look = pc if depth == 0 else pc - 1
        place = maps.places.get(look)
        if place is None:
            place = _place(maps, look)
            if place is None:
                frames.append(Frame("", UNKNOWN))
                return Stack(tuple(frames), False)
            if len(maps.places) < MAX_PLACES:
                maps.places[look] = place
        frame, rule = place
        frames.append(frame)
        if rule is not None and rule.cfa_reg >= 0:
            if rule.ra_offset is None:
                return Stack(tuple(frames), True)  # the outermost frame (_start, a thread's)
            cfa = (csp if rule.cfa_reg == RSP else cbp) + rule.cfa_offset
            ra = word(cfa + rule.ra_offset)
            if rule.rbp_offset is not None:
                saved = word(cfa + rule.rbp_offset)
                if saved is None:
                    ra = None
                else:
                    cbp = saved
            csp = cfa
        else:
            # No rule: the frame pointer, where it points into the copy.
            ra = word(cbp + 8)
            saved = word(cbp)
            if ra is None or saved is None or cbp < csp:
                ra = None
            else:
                csp, cbp = cbp + 16, saved
        if ra is None:
            frames.append(Frame("", UNKNOWN))  # the copy ended, or nothing says where
            return Stack(tuple(frames), False)
        if ra == 0:
            return Stack(tuple(frames), True)
        pc = ra
    frames.append(Frame("", UNKNOWN))
    return Stack(tuple(frames), False)
