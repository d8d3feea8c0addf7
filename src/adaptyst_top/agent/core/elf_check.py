"""What the root process believes of a user's ELF file: its program headers, read here
with two bounded reads (64 bytes, then at most MAX_SEGMENTS x 56), and the user's
worker's answer (agent/worker/parse_elf.py) checked field by field against them. Every
function's place in the file is computed here from its address and these headers,
never taken from the worker; an address outside the file's loaded bytes has none and
is never attached to."""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import Any

from elftools.elf.enums import ENUM_E_MACHINE

from adaptyst_top.agent.worker.parse_elf import MAX_NAME, MAX_SOURCE
from adaptyst_top.collectors.probes.elf.elf_info import (
    ElfInfo,
    FunctionSymbol,
    NotELFError,
    UsdtProbe,
)
from adaptyst_top.collectors.probes.elf.fde_starts import fde_starts, starts_function

_HEADER = struct.Struct("<4sBBBBBxxxxxxxHHIQQQIHHHHHH")  # Elf64_Ehdr
_PHDR = struct.Struct(
    "<IIQQQQQQ"
)  # Elf64_Phdr: type, flags, offset, vaddr, paddr, filesz, memsz, align
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr: name, type, flags, addr, offset, size, ...
_PT_LOAD, _PF_X, _PF_W, _ET_EXEC = 1, 1, 2, 2
MAX_SEGMENTS = 512
MAX_SECTIONS = 4096
MAX_NAMES = 1 << 20  # bytes of section names read
MAX_FUNCTIONS = 1_000_000  # OpenBLAS unstripped has 224,372
MAX_NOTE = 4096
_MACHINES = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
_ADDRESS = 1 << 64

Loads = tuple[tuple[int, int, int], ...]


class Lied(NotELFError):
    """The parser's answer is of the wrong shape: it is not believed again."""


def headers(fd: int, path: str) -> tuple[str, bool, Loads, Loads, Loads]:
    """(machine, fixed, loads, readonly loads, executable loads) of the 64-bit
    little-endian ELF file FD; NotELFError in one line for anything else."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, _HEADER.size, 0)
    if len(head) < _HEADER.size or head[:4] != b"\x7fELF":
        raise NotELFError(f"{path}: not an ELF file")
    _, cls, data, *_, e_type, machine, _, _, phoff, _, _, _, phentsize, phnum, _, _, _ = (
        _HEADER.unpack(head)
    )
    if cls != 2 or data != 1:
        raise NotELFError(f"{path}: only 64-bit little-endian ELF files are probed")
    if phentsize != _PHDR.size or phnum > MAX_SEGMENTS or phoff + phnum * _PHDR.size > size:
        raise NotELFError(f"{path}: not a readable ELF file (its program headers)")
    table = os.pread(fd, phnum * _PHDR.size, phoff)
    loads, readonly, code = [], [], []
    for p_type, flags, offset, vaddr, _, filesz, _, _ in _PHDR.iter_unpack(table):
        if p_type != _PT_LOAD:
            continue
        if offset + filesz > size or vaddr + filesz >= _ADDRESS:
            raise NotELFError(f"{path}: not a readable ELF file (a segment lies past its end)")
        loads.append((vaddr, filesz, offset))
        if not flags & _PF_W:
            readonly.append((vaddr, filesz, offset))
        if flags & _PF_X:
            code.append((vaddr, filesz, offset))
    name = _MACHINES.get(machine, f"EM_{machine}")
    return name, e_type == _ET_EXEC, tuple(loads), tuple(readonly), tuple(code)


def semaphores(fd: int) -> tuple[int, int] | None:
    """(address, size) of the file's `.probes` section, where SDT semaphores live, from
    bounded reads of the section headers and their names; None when it has none. A
    semaphore is taken only there: the kernel raises the word at that place in every
    process that maps the file while the probe is attached, across an exec too."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, _HEADER.size, 0)
    if len(head) < _HEADER.size:
        return None
    *_, shoff, _, _, _, _, shentsize, shnum, shstrndx = _HEADER.unpack(head)[9:]
    if shentsize != _SHDR.size or not 0 < shnum <= MAX_SECTIONS or shstrndx >= shnum:
        return None
    if shoff + shnum * _SHDR.size > size:
        return None
    table = list(_SHDR.iter_unpack(os.pread(fd, shnum * _SHDR.size, shoff)))
    names_at, names_size = table[shstrndx][4], table[shstrndx][5]
    if names_at + min(names_size, MAX_NAMES) > size:
        return None
    names = os.pread(fd, min(names_size, MAX_NAMES), names_at)
    for name, _, _, addr, _, sh_size, *_ in table:
        if names[name : name + len(b".probes") + 1] == b".probes\0":
            return addr, sh_size
    return None


def checked(answer: Any, fd: int, path: str) -> ElfInfo:
    """The worker's ANSWER for the file FD (shown as PATH), as the root process takes
    it: NotELFError with the worker's one line, or for any field of the wrong shape."""
    if isinstance(answer, dict) and isinstance(why := answer.get("error"), str):
        raise NotELFError(_line(why) or f"{path}: not a readable ELF file")
    machine, fixed, loads, readonly, code = headers(fd, path)
    try:
        functions = answer["functions"]
        notes = answer["usdt"]
        stripped = answer["stripped"]
        if not (isinstance(functions, list) and isinstance(notes, list)):
            raise TypeError
        if len(functions) > MAX_FUNCTIONS or len(notes) > MAX_FUNCTIONS:
            raise TypeError
        # A function or a USDT site outside the executable segments is no place to probe.
        syms = tuple(s for f in functions if (s := _function(f, code)) is not None)
        # Attached at an address the parser named (a debug file's name): only where the
        # file's own unwind index says a function starts (a probe inside an instruction
        # would change what every process that maps the file computes); else by name.
        if any(s.by_address for s in syms):
            starts = fde_starts(fd)
            syms = tuple(
                s
                if not s.by_address or starts_function(starts, s.address)
                else dataclasses.replace(s, by_address=False)
                for s in syms
            )
        # A semaphore must be a 2-byte word of the .probes section, in a segment the
        # process may write: nowhere else will the kernel be asked to raise one.
        data = tuple(x for x in loads if x not in readonly)
        probes_at = semaphores(fd) if any(_usdt(n).semaphore for n in notes) else None

        def semaphore_ok(u: UsdtProbe) -> bool:
            if u.semaphore == 0:
                return True
            if probes_at is None or u.semaphore % 2:
                return False
            start, length = probes_at
            inside = start <= u.semaphore and u.semaphore + 2 <= start + length
            return inside and _place(data, u.semaphore) is not None

        probes = tuple(
            u
            for n in notes
            if _place(code, (u := _usdt(n)).address) is not None and semaphore_ok(u)
        )
        if not isinstance(stripped, bool):
            raise TypeError
    except (KeyError, TypeError, ValueError):
        raise Lied(f"{path}: the parser answered wrongly") from None
    st = os.fstat(fd)
    return ElfInfo(
        path=path,
        functions=syms,
        usdt=probes,
        stripped=stripped,
        machine=machine,
        loads=loads,
        readonly=readonly,
        fixed=fixed,
        identity=(st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size),
    )


def _line(text: str) -> str:
    return text.splitlines()[0][:300] if text else ""


def _text(x: object, limit: int) -> str:
    if not isinstance(x, str) or len(x) > limit:
        raise TypeError
    return x


def _address(x: object) -> int:
    if type(x) is not int or not 0 <= x < _ADDRESS:
        raise TypeError
    return x


def _place(code: Loads, vaddr: int) -> int | None:
    return next((vaddr - s + o for s, n, o in code if s <= vaddr < s + n), None)


def _function(f: object, code: Loads) -> FunctionSymbol | None:
    """The function F names, placed by CODE; None where it lies outside them (an IFUNC's
    resolver is placed, not its implementation: that is found later, here)."""
    if not isinstance(f, list) or len(f) not in (5, 6):
        raise TypeError
    raw, source, address, size, ifunc = f[:5]
    # Named by a debug file, not the file itself: attached by address (an exported name
    # claimed so is attached at that same address: the claim changes nothing else).
    by_address = f[5] if len(f) == 6 else False
    name = _text(raw, MAX_NAME)
    if not name or not isinstance(ifunc, bool) or not isinstance(by_address, bool):
        raise TypeError
    vaddr = _address(address)
    offset = _place(code, vaddr)
    if offset is None:
        return None
    return FunctionSymbol(
        name,
        vaddr,
        _address(size),
        offset,
        ifunc and not by_address,
        _text(source, MAX_SOURCE),
        by_address,
    )


def _usdt(u: object) -> UsdtProbe:
    if not isinstance(u, list) or len(u) != 5:
        raise TypeError
    provider, name, address, semaphore, arguments = u
    return UsdtProbe(
        _text(provider, MAX_NOTE),
        _text(name, MAX_NOTE),
        _address(address),
        _address(semaphore),
        _text(arguments, MAX_NOTE),
    )
