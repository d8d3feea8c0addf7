"""Where functions start, by a file's own unwind index (.eh_frame_hdr: the linker's
sorted table of every .eh_frame entry's start), read with bounded plain reads: what root
checks an address against before it attaches a probe there (an address a user's parser
named, or a spec's 0xADDRESS), since a probe inside an instruction would corrupt every
process that maps the file. No parser of the file's other bytes runs here."""

from __future__ import annotations

import bisect
import os
import struct
from array import array

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")  # Elf64_Ehdr
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_HDR = struct.Struct("<BBBBiI")  # version, three encodings, eh_frame_ptr, fde_count
_ENCODINGS = (0x1B, 0x03, 0x3B)  # what GNU ld and lld write
MAX_SECTIONS = 4096
MAX_NAMES = 1 << 20
MAX_ENTRIES = 4_000_000  # libxul has ~300,000


def fde_starts(fd: int) -> array[int] | None:
    """The sorted start addresses (link-time) of every function the file FD's unwind
    index lists; None when it has no index in the usual encoding, or is not one."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, _EHDR.size, 0)
    if len(head) < _EHDR.size or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    *_, shoff, _, _, _, _, shentsize, shnum, shstrndx = _EHDR.unpack(head)
    if shentsize != _SHDR.size or not 0 < shnum <= MAX_SECTIONS or shstrndx >= shnum:
        return None
    if shoff + shnum * _SHDR.size > size:
        return None
    table = list(_SHDR.iter_unpack(os.pread(fd, shnum * _SHDR.size, shoff)))
    names_at, names_size = table[shstrndx][4], min(table[shstrndx][5], MAX_NAMES)
    if names_at + names_size > size:
        return None
    names = os.pread(fd, names_size, names_at)
    for name, kind, _, addr, offset, length, *_ in table:
        if names[name : name + 14] != b".eh_frame_hdr\0" or kind == 8:  # SHT_NOBITS
            continue
        if length < _HDR.size or offset + length > size:
            return None
        version, *encodings, _ptr, count = _HDR.unpack(os.pread(fd, _HDR.size, offset))
        if version != 1 or tuple(encodings) != _ENCODINGS or count > MAX_ENTRIES:
            return None
        if _HDR.size + 8 * count > length:
            return None
        pairs = array("i", os.pread(fd, 8 * count, offset + _HDR.size))
        starts = array("q", sorted(addr + v for v in pairs[0::2]))
        return starts
    return None


def starts_function(starts: array[int] | None, address: int) -> bool:
    """Whether a function starts at ADDRESS by STARTS."""
    if not starts:
        return False
    i = bisect.bisect_left(starts, address)
    return i < len(starts) and starts[i] == address
