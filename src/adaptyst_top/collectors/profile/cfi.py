"""A binary's call-frame tables (.eh_frame, else .debug_frame), read with pyelftools into
rows an unwinder can look up by address.

pyelftools, not libdwfl or libunwind: a user's binary is hostile bytes, and a corrupt
table here raises a Python exception (that table's frames become [unknown]) where a C
parser could take the process down; it is a dependency already (ELF symbols, USDT
notes). Its cost is paid once per file (libc: 0.8 s of CPU for 3,713 FDEs, in
bench/README.md) and the rows are kept by the file's identity.

Only what x86-64 code needs to find its caller is kept: how the CFA is computed (from
rsp or rbp plus an offset), where the return address and the caller's rbp were saved.
"""

from __future__ import annotations

import bisect
import io
import os
import struct
import sys
import threading
from array import array
from dataclasses import dataclass

from elftools.dwarf.callframe import FDE, CallFrameInfo, RegisterRule
from elftools.dwarf.structs import DWARFStructs
from elftools.elf.elffile import ELFFile

RSP, RBP, RA = 7, 6, 16  # DWARF register numbers on x86-64 (RA: the return address)
MAX_ROWS = 2_000_000  # a table past this is not a compiler's: the rest is [unknown]
MAX_SECTION = 64 << 20  # .eh_frame and its index: libxul's are ~10 MiB
MAX_ENTRY_BYTES = 64 << 10  # one function's entry (a compiler's: tens of bytes)
MAX_ENTRY_ROWS = 4096
MAX_PARSED = 100_000  # entries kept parsed per file
SHF_COMPRESSED = 0x800


@dataclass(frozen=True, slots=True)
class Rule:
    """From START to END: CFA = (rsp if CFA_REG == RSP else rbp) + CFA_OFFSET; the return
    address at CFA + RA_OFFSET (None: this is the outermost frame); the caller's rbp at
    CFA + RBP_OFFSET (None: unchanged)."""

    start: int
    end: int
    cfa_reg: int
    cfa_offset: int
    ra_offset: int | None
    rbp_offset: int | None


class CfiTable:
    def __init__(
        self, rules: list[Rule], errors: int = 0, entries: list[int] | None = None
    ) -> None:
        """ENTRIES: where each function's entry starts (sorted)."""
        self._entries = sorted(entries or [])
        rules.sort(key=lambda r: r.start)
        self.rules = rules
        self._starts = [r.start for r in rules]
        self.errors = errors  # entries that could not be read (their frames: [unknown])

    def find(self, vaddr: int) -> Rule | None:
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i >= 0 and vaddr < self.rules[i].end:
            return self.rules[i]
        return None

    def function_at(self, vaddr: int) -> int | None:
        """The start of the function (its entry in the table) that holds VADDR: what
        names a frame where no symbol does."""
        i = bisect.bisect_right(self._entries, vaddr) - 1
        if i >= 0 and self.find(vaddr) is not None:
            return self._entries[i]
        return None


def _offset(rule: object) -> int | None:
    if not isinstance(rule, RegisterRule) or rule.type != RegisterRule.OFFSET:
        return None
    return rule.arg if isinstance(rule.arg, int) else None


def _rules_of(fde: FDE) -> list[Rule]:
    decoded = fde.get_decoded()
    ra_reg = RA if fde.cie is None else int(fde.cie.header.get("return_address_register", RA))
    start = int(fde.header["initial_location"])
    end = start + int(fde.header["address_range"])
    table = decoded.table
    out = []
    for i, row in enumerate(table):
        lo = int(row["pc"])
        hi = int(table[i + 1]["pc"]) if i + 1 < len(table) else end
        cfa = row["cfa"]
        if cfa.expr is not None or cfa.reg not in (RSP, RBP):
            reg, off = -1, 0  # an expression (a PLT's): not followed
        else:
            reg, off = int(cfa.reg), int(cfa.offset)
        ra = row.get(ra_reg)
        undefined = isinstance(ra, RegisterRule) and ra.type == RegisterRule.UNDEFINED
        ra_off = None if undefined else (_offset(ra) if ra is not None else -8)
        if ra_off is None and not undefined:
            reg = -1  # a return address kept elsewhere: not followed
        out.append(Rule(lo, hi, reg, off, ra_off, _offset(row.get(RBP))))
    return out


class IndexedCfi(CfiTable):
    """A table read an entry at a time, where the linker's sorted index of .eh_frame
    (.eh_frame_hdr) says which entry covers an address: a profile reads the few dozen
    functions its samples land in, not all of libc's 3,713 (1.1 s of CPU here)."""

    def __init__(self, cfi: CallFrameInfo, starts: array[int], offsets: array[int]) -> None:
        super().__init__([])
        self._cfi = cfi
        self._body = cfi.stream.getbuffer()  # type: ignore[attr-defined]
        self._index = starts
        self._offsets = offsets
        self._parsed: dict[int, list[Rule]] = {}
        # One stream under pyelftools' parser: two threads (the profile's, a probe's
        # planning) reading entries at once would each read the other's bytes.
        self._lock = threading.Lock()

    def find(self, vaddr: int) -> Rule | None:
        i = bisect.bisect_right(self._index, vaddr) - 1
        if i < 0:
            return None
        rules = self._parsed.get(i)
        if rules is None:
            with self._lock:
                rules = self._parse(self._offsets[i])
            if len(self._parsed) < MAX_PARSED:
                self._parsed[i] = rules
        for r in rules:
            if r.start <= vaddr < r.end:
                return r
        return None

    def function_at(self, vaddr: int) -> int | None:
        i = bisect.bisect_right(self._index, vaddr) - 1
        if i >= 0 and self.find(vaddr) is not None:
            return int(self._index[i])
        return None

    def _parse(self, offset: int) -> list[Rule]:
        body = self._body
        if not 0 <= offset <= len(body) - 4:
            self.errors += 1
            return []
        length = int.from_bytes(body[offset : offset + 4], "little")
        if length > MAX_ENTRY_BYTES:  # a compiler's entry is tens of bytes
            self.errors += 1
            return []
        try:
            entry = self._cfi._parse_entry_at(offset)
            rules = _rules_of(entry) if isinstance(entry, FDE) else []
        except Exception:  # pyelftools raises many kinds on bad bytes
            self.errors += 1
            return []
        return rules[:MAX_ENTRY_ROWS]


_HDR = struct.Struct("<BBBBiI")  # version, 3 encodings, eh_frame_ptr, fde_count
# pcrel|sdata4, udata4, datarel|sdata4: what GNU ld and lld write
_HDR_ENCODINGS = (0x1B, 0x03, 0x3B)


def _section(elf: ELFFile, name: str, size: int) -> bytes | None:
    """A section's bytes as the file holds them: None for one that is not there, has no
    bytes in the file (NOBITS), is compressed, or lies past the file's end or MAX_SECTION
    (pyelftools would make NOBITS zeros and inflate a compressed one to any size)."""
    sec = elf.get_section_by_name(name)
    if sec is None or sec["sh_type"] == "SHT_NOBITS" or sec["sh_flags"] & SHF_COMPRESSED:
        return None
    offset, length = int(sec["sh_offset"]), int(sec["sh_size"])
    if length > MAX_SECTION or offset + length > size:
        return None
    return bytes(sec.data())


def _indexed(elf: ELFFile, size: int) -> IndexedCfi | None:
    """The lazily read table, where the file has an index in the usual encoding."""
    hdr_sec, frame_sec = (
        elf.get_section_by_name(".eh_frame_hdr"),
        elf.get_section_by_name(".eh_frame"),
    )
    data = _section(elf, ".eh_frame_hdr", size)
    body = _section(elf, ".eh_frame", size)
    if data is None or body is None or hdr_sec is None or frame_sec is None:
        return None
    if len(data) < _HDR.size:
        return None
    version, *encodings, _ptr, count = _HDR.unpack_from(data)
    if version != 1 or tuple(encodings) != _HDR_ENCODINGS or len(data) < _HDR.size + 8 * count:
        return None
    pairs = array("i", data[_HDR.size : _HDR.size + 8 * count])
    if sys.byteorder != "little":
        pairs.byteswap()
    base, frame_addr = int(hdr_sec["sh_addr"]), int(frame_sec["sh_addr"])
    starts = array("q", (base + v for v in pairs[0::2]))
    offsets = array("q", (base + v - frame_addr for v in pairs[1::2]))
    if any(starts[i] > starts[i + 1] for i in range(len(starts) - 1)):
        return None  # not the binary search table it claims to be
    # The structures pyelftools reads CFI with, made here: get_dwarf_info() would read
    # every .debug_* section first, whatever size they claim.
    structs = DWARFStructs(
        little_endian=elf.little_endian, dwarf_format=32, address_size=elf.elfclass // 8
    )
    cfi = CallFrameInfo(io.BytesIO(body), len(body), frame_addr, structs, for_eh_frame=True)
    return IndexedCfi(cfi, starts, offsets)


def read_cfi(path: str, eager: bool = False) -> CfiTable:
    """The call-frame rules of the ELF file at PATH (an empty table when it has none or
    cannot be read; entries that fail to decode are counted in `errors`); read an entry
    at a time where the file indexes them, unless EAGER."""
    if not eager:
        # Without an index (ld writes one unless told not to) the table is not read:
        # reading it whole has no bound a hostile file cannot reach; frame pointers then.
        try:
            with open(path, "rb") as f:
                indexed = _indexed(ELFFile(f), os.fstat(f.fileno()).st_size)
        except Exception:  # pyelftools raises many kinds on bad bytes
            return CfiTable([], errors=1)
        return indexed if indexed is not None else CfiTable([])
    rules: list[Rule] = []
    starts: list[int] = []
    errors = 0
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            if not elf.has_dwarf_info() and elf.get_section_by_name(".eh_frame") is None:
                return CfiTable([])
            dwarf = elf.get_dwarf_info(follow_links=False)
            if dwarf.has_EH_CFI():
                entries = dwarf.EH_CFI_entries()
            elif dwarf.has_CFI():
                entries = dwarf.CFI_entries()
            else:
                return CfiTable([])
            for entry in entries:
                if not isinstance(entry, FDE):
                    continue
                try:
                    rules += _rules_of(entry)
                    starts.append(int(entry.header["initial_location"]))
                except Exception:  # pyelftools raises many kinds on bad bytes
                    errors += 1
                if len(rules) > MAX_ROWS:
                    errors += 1
                    break
    except Exception:
        return CfiTable([], errors=1)
    return CfiTable(rules, errors, starts)


_TABLES: dict[tuple[int, int, int, int], CfiTable] = {}
MAX_TABLES = 256  # files whose tables are kept (a table: ~100 bytes a row)


def cfi_for(path: str) -> CfiTable:
    """PATH's table, read once per file version (device, inode, change time, size): the
    same library seen through two processes' /proc/PID/root is read once."""
    try:
        st = os.stat(path)
    except OSError:
        return CfiTable([], errors=1)
    key = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size)
    table = _TABLES.get(key)
    if table is None:
        if len(_TABLES) >= MAX_TABLES:
            _TABLES.pop(next(iter(_TABLES)))
        table = _TABLES[key] = read_cfi(path)
    return table
