"""Which CPython a process runs, and where its `_PyRuntime` lies: read from the process's
maps and the dynamic symbol table of the file that defines it (libpython3.X.so, or a
python3.X executable linked statically), with bounded reads of plain structures only:
this runs in root's process for a user's (the agent), over bytes that user may control."""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass

from adaptyst_top.collectors.profile.python.offsets import OFFSETS

_NAME = re.compile(r"/(?:lib)?python3\.(\d+)[a-z]*(?:\.so[.0-9]*|d|m|)?$")
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_SYM = struct.Struct("<IBBHQQ")
SHT_DYNSYM = 11
MAX_SECTIONS = 4096
MAX_SYMBOLS = 200_000  # libpython3.11 exports ~2,000
MAX_STRINGS = 8 << 20
RUNTIME = b"_PyRuntime"
# Each file read once (by its identity), whatever it held: a process that is checked
# again, or many that map one interpreter, cost a stat.
_SEEN: dict[tuple[int, int, int, int], tuple[int, int] | None] = {}


@dataclass(frozen=True, slots=True)
class PythonProcess:
    version: tuple[int, int]
    runtime: int  # the address of _PyRuntime in the process
    path: str  # the file that defines it, as the process maps it


def _maps(pid: int) -> list[tuple[str, int, str]]:
    """(range, file offset, path) of each file mapping of PID."""
    out = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    out.append((parts[0], int(parts[2], 16), parts[5].strip()))
    except (OSError, ValueError):
        return []
    return out


def runtime_vaddr(fd: int) -> tuple[int, int] | None:
    """(_PyRuntime's link-time address, the link-time address of file offset 0) in the
    64-bit little-endian ELF file FD, from its .dynsym; None when it has none."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, _EHDR.size, 0)
    if len(head) < _EHDR.size or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    _, _, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _ = _EHDR.unpack(head)
    if shentsize != _SHDR.size or not 0 < shnum <= MAX_SECTIONS or shoff + shnum * 64 > size:
        return None
    if phentsize != _PHDR.size or phnum > MAX_SECTIONS or phoff + phnum * 56 > size:
        return None
    base = None
    for p in _PHDR.iter_unpack(os.pread(fd, phnum * _PHDR.size, phoff)):
        if p[0] == 1 and p[2] == 0:  # PT_LOAD at file offset 0
            base = p[3]
    sections = list(_SHDR.iter_unpack(os.pread(fd, shnum * _SHDR.size, shoff)))
    for sh in sections:
        if sh[1] != SHT_DYNSYM or sh[9] != _SYM.size or sh[6] >= shnum or base is None:
            continue
        count = min(sh[5] // _SYM.size, MAX_SYMBOLS)
        strtab = sections[sh[6]]
        if sh[4] + count * _SYM.size > size or strtab[4] + min(strtab[5], MAX_STRINGS) > size:
            return None
        names = os.pread(fd, min(strtab[5], MAX_STRINGS), strtab[4])
        for name, _, _, shndx, value, _ in _SYM.iter_unpack(os.pread(fd, count * _SYM.size, sh[4])):
            if shndx and names[name : name + len(RUNTIME) + 1] == RUNTIME + b"\0":
                return value, base
    return None


def python_version(pid: int) -> tuple[int, int] | None:
    """The CPython version PID maps (by its interpreter's file name, what a user may
    read of her own process), or None."""
    for _, offset, path in _maps(pid):
        m = _NAME.search(path)
        if offset == 0 and m is not None:
            return (3, int(m.group(1)))
    return None


def find_python(pid: int) -> PythonProcess | None:
    """The CPython PID runs (a version offsets.py knows), or None."""
    maps = _maps(pid)
    for span, offset, path in maps:
        m = _NAME.search(path)
        if offset != 0 or m is None or (3, int(m.group(1))) not in OFFSETS:
            continue
        try:
            # The kernel's link to the file mapped there, never the path the maps name.
            lo, _, hi = span.partition("-")
            link = f"/proc/{pid}/map_files/{int(lo, 16):x}-{int(hi, 16):x}"
            fd = os.open(link, os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, ValueError):
            continue
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size)
            if identity in _SEEN:
                found = _SEEN[identity]
            else:
                found = _SEEN[identity] = runtime_vaddr(fd)
                while len(_SEEN) > 256:
                    _SEEN.pop(next(iter(_SEEN)))
        except OSError:
            found = None
        finally:
            os.close(fd)
        if found is not None:
            vaddr, base = found
            start = int(span.partition("-")[0], 16)
            return PythonProcess((3, int(m.group(1))), start + vaddr - base, path)
    return None
