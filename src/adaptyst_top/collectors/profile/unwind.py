"""A sample's user stack, unwound from its registers and a copy of the stack's top: each
frame's caller found from the call-frame rules of the code it runs (cfi.py), from the
frame pointer where a function has no rule, and named by the symbols of its file."""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from adaptyst_top.collectors.probes.elf.demangle import name_of
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo
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


@dataclass(frozen=True, slots=True)
class Pending:
    """What the kernel's uprobes hold of a thread as it was sampled (sampler.RETURNS)."""

    # Each pending uretprobe return, newest first: {the stack slot where the return
    # address lay (the trampoline's now): the caller's address}
    returns: dict[int, int]
    vaddr: int = 0  # the probed instruction the thread is stepping out of line, or 0
    xol: int = 0  # where its copy runs: the thread's slot in [uprobes]


XOL_SLOT_BYTES = 128  # x86's UPROBE_XOL_SLOT_BYTES (sampler.bpf.c's XOL_SLOT)
UPROBES = "[uprobes]"  # the kernel's page of trampolines and slots: the probes' own cost


def _trampoline_slot(pending: Pending, sp: int) -> int | None:
    """The return the trampoline at SP is taking: the newest whose slot lies where the
    return popped it (sp - 8) or up to the three words the trampoline pushes (sp + 16)."""
    for slot in pending.returns:
        if sp - 8 <= slot <= sp + 16:
            return slot
    return None


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


def unwind(
    maps: ProcessMaps,
    ip: int,
    sp: int,
    bp: int,
    stack: bytes,
    pending: Pending | None = None,
) -> Stack:
    """The frames of a thread stopped at IP with SP and BP, STACK the bytes from SP up.
    PENDING: its uprobes' state: a return address read from a pending return's slot is
    the kernel's trampoline, not the caller; an ip in [uprobes] is a probe's own work,
    shown as one frame under the function it stands in (perf stops there)."""
    returns = pending.returns if pending is not None else None

    def word(addr: int) -> int | None:
        i = addr - sp
        if 0 <= i <= len(stack) - 8:
            return int(_WORD.unpack_from(stack, i)[0])
        return None

    def return_at(addr: int) -> int | None:
        ra = word(addr)
        if returns and ra is not None and addr in returns:
            # Only the trampoline stands for the caller: a slot a longjmp left behind
            # holds another return address now.
            m = maps.find(ra)
            if m is not None and m.path == UPROBES:
                return returns[addr]
        return ra

    frames: list[Frame] = []
    pc, csp, cbp, at_ip = ip, sp, bp, True
    if pending is not None:
        if pending.xol and 0 <= ip - pending.xol < XOL_SLOT_BYTES:
            # Stepping a probed instruction's copy: the function's own place is as far on.
            frames.append(Frame(UPROBES, UPROBES))
            pc = pending.vaddr + (ip - pending.xol)
        elif (m := maps.find(ip)) is not None and m.path == UPROBES:
            # In the return trampoline: the function has returned; its caller goes on.
            slot = _trampoline_slot(pending, sp)
            if slot is not None:
                frames.append(Frame(UPROBES, UPROBES))
                pc, csp, at_ip = pending.returns[slot], slot + 8, False
    for _ in range(MAX_FRAMES - len(frames)):  # the agent holds a stack to MAX_FRAMES + 1
        # A caller's address is a return address: the call lies just before it.
        look = pc if at_ip else pc - 1
        at_ip = False
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
            ra = return_at(cfa + rule.ra_offset)
            if rule.rbp_offset is not None:
                saved = word(cfa + rule.rbp_offset)
                if saved is None:
                    ra = None
                else:
                    cbp = saved
            csp = cfa
        else:
            # No rule: the frame pointer, where it points into the copy.
            ra = return_at(cbp + 8)
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
