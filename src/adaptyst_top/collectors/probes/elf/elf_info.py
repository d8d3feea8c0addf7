"""What a binary offers to probe: function symbols, USDT notes, entry instructions."""

from __future__ import annotations

import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from elftools.common.exceptions import ELFError
from elftools.elf.constants import P_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection, SymbolTableSection

from adaptyst_top.system.targets import CONTAINER_PATH


class NotELFError(ValueError):
    pass


@dataclass(frozen=True)
class FunctionSymbol:
    name: str
    address: int  # link-time virtual address (st_value)
    size: int
    file_offset: int | None  # where its first instruction lies in the file
    # A GNU indirect function: `address` is its resolver, run once by the dynamic
    # loader; calls go to the implementation the resolver picked (collectors/probes/elf/ifunc.py).
    ifunc: bool = False
    # The name as the source spells it, where the agent's user worker demangled it (the
    # root process never demangles a user's bytes); None: demangled where it is shown.
    source: str | None = None
    # Named by a separate debug file or by its address alone: the file itself has no
    # such symbol, so a probe is attached at the address, never by name.
    by_address: bool = False


@dataclass(frozen=True)
class UsdtProbe:
    provider: str
    name: str
    address: int
    semaphore: int  # 0 when the probe is not semaphore-gated
    arguments: str  # the raw SDT argument spec, e.g. "-4@%eax 8@%rdx"

    @property
    def arg_specs(self) -> list[str]:
        return self.arguments.split() if self.arguments else []


@dataclass(frozen=True)
class ElfInfo:
    path: str
    functions: tuple[FunctionSymbol, ...]
    usdt: tuple[UsdtProbe, ...]
    stripped: bool  # no .symtab: only exported (.dynsym) functions are visible
    machine: str
    loads: tuple[tuple[int, int, int], ...] = ()  # PT_LOAD (p_vaddr, p_filesz, p_offset)
    readonly: tuple[tuple[int, int, int], ...] = ()  # those the process cannot write
    fixed: bool = False  # ET_EXEC: loaded at its link-time addresses
    # The file read: (st_dev, st_ino, st_ctime_ns, st_size); a later open is checked on it.
    identity: tuple[int, int, int, int] = (0, 0, 0, 0)

    def offset_of(self, vaddr: int) -> int | None:
        """Where a link-time virtual address lies in the file (None outside PT_LOADs)."""
        return _offset_in(self.loads, vaddr)

    @property
    def load_base_vaddr(self) -> int:
        """The virtual address of the file's first loadable byte (its offset-0 mapping)."""
        return self.loads[0][0] - self.loads[0][2] if self.loads else 0


# How a caller's ELF files are parsed: read_elf here, the agent's in its user's worker.
ElfReader = Callable[[str], ElfInfo]

# pyelftools names type 10 STT_LOOS (the first OS-specific type); on GNU it is IFUNC.
FUNC_TYPES = ("STT_FUNC", "STT_GNU_IFUNC", "STT_LOOS")


def _hidden_version(versym: object, index: int) -> bool:
    """A non-default symbol version (name@VER, not name@@VER): kept for old binaries."""
    if versym is None:
        return False
    try:
        ndx = versym.get_symbol(index).entry["ndx"]  # type: ignore[attr-defined]
    except Exception:  # a malformed or short version table: keep the symbol
        return False
    return isinstance(ndx, int) and bool(ndx & 0x8000)


def _offset_in(loads: tuple[tuple[int, int, int], ...], vaddr: int) -> int | None:
    for start, size, offset in loads:
        if start <= vaddr < start + size:
            return vaddr - start + offset
    return None


def _loads(elf: ELFFile, writable: bool = True) -> tuple[tuple[int, int, int], ...]:
    return tuple(
        (int(seg["p_vaddr"]), int(seg["p_filesz"]), int(seg["p_offset"]))
        for seg in elf.iter_segments()
        if seg["p_type"] == "PT_LOAD" and (writable or not seg["p_flags"] & P_FLAGS.PF_W)
    )


_ADDRESS = (1 << 64) - 1


def _parse_stapsdt(elf: ELFFile) -> list[UsdtProbe]:
    probes: list[UsdtProbe] = []
    base_sec = elf.get_section_by_name(".stapsdt.base")
    for section in elf.iter_sections():
        if not isinstance(section, NoteSection):
            continue
        for note in section.iter_notes():
            # pyelftools names n_type as if it were a GNU note; the owner name is what counts.
            if note["n_name"] != "stapsdt":
                continue
            desc = note["n_descdata"]
            if isinstance(desc, str):
                desc = desc.encode("latin-1")
            pc, base, sem = struct.unpack_from("<QQQ", desc, 0)
            provider, name, args = [*desc[24:].split(b"\0"), b"", b"", b""][:3]
            # Prelink adjustment as in the SystemTap SDT spec.
            if base_sec is not None and base:
                # In 64 bits, as the spec's addresses are: a hostile base made a
                # location below -2^63 that no JSON encoder takes.
                delta = base_sec["sh_addr"] - base
                pc = (pc + delta) & _ADDRESS
                if sem:
                    sem = (sem + delta) & _ADDRESS
            probes.append(
                UsdtProbe(
                    provider.decode(errors="replace"),
                    name.decode(errors="replace"),
                    pc,
                    sem,
                    args.decode(errors="replace"),
                )
            )
    return probes


_SYM64 = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
_STT_FUNC, _STT_GNU_IFUNC = 2, 10


def _symbols64(
    elf: ELFFile,
    section: SymbolTableSection,
    versym: object,
    loads: tuple[tuple[int, int, int], ...],
) -> list[FunctionSymbol]:
    """A 64-bit little-endian symbol table's functions, unpacked in bulk: pyelftools
    parses one symbol at a time through `construct` (9 s for the 43,000 functions a
    Python process with numpy maps; the add-probe picker waited that long)."""
    names = elf.get_section(section["sh_link"]).data()
    hidden = b""
    if section.name == ".dynsym" and versym is not None:
        hidden = versym.data()  # type: ignore[attr-defined]
    out = []
    for i, (st_name, info, _other, shndx, value, size) in enumerate(
        _SYM64.iter_unpack(section.data())
    ):
        kind = info & 0xF
        if kind not in (_STT_FUNC, _STT_GNU_IFUNC) or shndx == 0 or st_name == 0:
            continue
        # memcpy@GLIBC_2.2.5 (a non-default version, bit 15 of .gnu.version): only
        # binaries linked in 2002 call it.
        if 2 * i + 2 <= len(hidden) and hidden[2 * i + 1] & 0x80:
            continue
        end = names.find(b"\0", st_name)
        name = names[st_name : end if end >= 0 else len(names)].decode(errors="replace")
        if not name:
            continue
        name = name.split("@")[0]
        out.append(
            FunctionSymbol(name, value, size, _offset_in(loads, value), ifunc=kind != _STT_FUNC)
        )
    return out


def _within(elf: ELFFile, size: int, segments: bool = True) -> None:
    """Every table and section the file says it has lies inside its SIZE bytes: a
    section of 2^60 bytes in a 20 KB file had pyelftools allocate for it (MemoryError,
    in the agent's root process)."""
    if elf["e_shoff"] + elf["e_shnum"] * elf["e_shentsize"] > size:
        raise ELFError("its section table lies past its end")
    if elf["e_phoff"] + elf["e_phnum"] * elf["e_phentsize"] > size:
        raise ELFError("its program headers lie past their end")
    for i in range(elf.num_sections()):
        h = elf._get_section_header(i)
        if h["sh_type"] != "SHT_NOBITS" and h["sh_offset"] + h["sh_size"] > size:
            raise ELFError(f"section {i} lies past its end")
    # A separate debug file keeps its twin's program headers over sections it has no
    # bytes for (NOBITS): its segments are never read, only its symbol table.
    for i in range(elf.num_segments() if segments else 0):
        h = elf._get_segment_header(i)
        if h["p_offset"] + h["p_filesz"] > size:
            raise ELFError(f"segment {i} lies past its end")


def parse_elf(
    f: BinaryIO, path: str, identity: tuple[int, int, int, int], debug: bool = False
) -> ElfInfo:
    """The ELF file F (named PATH, of IDENTITY), parsed; NotELFError in one line. DEBUG:
    a separate debug file, read for its symbols alone (its loads are its twin's)."""
    try:
        elf = ELFFile(f)
        _within(elf, identity[3], segments=not debug)
        funcs: dict[tuple[str, int], FunctionSymbol] = {}
        have_symtab = False
        versym = elf.get_section_by_name(".gnu.version")
        loads = _loads(elf)
        for section in elf.iter_sections():
            if not isinstance(section, SymbolTableSection):
                continue
            if section.name == ".symtab":
                have_symtab = True
            if elf.elfclass == 64 and elf.little_endian and section["sh_entsize"] == 24:
                for fn in _symbols64(elf, section, versym, loads):
                    funcs.setdefault((fn.name, fn.address), fn)
                continue
            for i, sym in enumerate(section.iter_symbols()):
                kind = sym["st_info"]["type"]
                if kind not in FUNC_TYPES:
                    continue
                if sym["st_shndx"] == "SHN_UNDEF" or not sym.name:
                    continue
                if section.name == ".dynsym" and _hidden_version(versym, i):
                    continue  # memcpy@GLIBC_2.2.5: only binaries linked in 2002 call it
                name = sym.name.split("@")[0]
                addr = int(sym["st_value"])
                funcs.setdefault(
                    (name, addr),
                    FunctionSymbol(
                        name,
                        addr,
                        int(sym["st_size"]),
                        _offset_in(loads, addr),
                        ifunc=kind != "STT_FUNC",
                    ),
                )
        return ElfInfo(
            path=path,
            functions=tuple(sorted(funcs.values(), key=lambda s: (s.name, s.address))),
            usdt=tuple(_parse_stapsdt(elf)),
            stripped=not have_symtab,
            machine=str(elf["e_machine"]),
            loads=loads,
            readonly=_loads(elf, writable=False),
            fixed=elf["e_type"] == "ET_EXEC",
            identity=identity,
        )
    except ELFError as exc:
        raise NotELFError(f"{path}: not an ELF file ({exc})") from exc
    except Exception as exc:  # a hostile file breaks pyelftools in many ways
        # struct and construct errors, bad text, out-of-range values: all one line.
        why = str(exc).splitlines()[0][:120] if str(exc) else ""
        raise NotELFError(f"{path}: not a readable ELF file ({type(exc).__name__}: {why})") from exc


def _opened(p: Path) -> BinaryIO:
    try:
        return open(p, "rb")
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None


_CACHE: OrderedDict[tuple[str, int, int, int, int, int, bool], ElfInfo] = OrderedDict()
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()


def read_elf(path: str | Path, debug: bool = False) -> ElfInfo:
    """Symbols and USDT notes of an ELF file, read from the one file opened here (cached
    by its inode until it changes): a path swapped meanwhile is never read instead.
    DEBUG: a separate debug file (parse_elf)."""
    p = Path(path)
    with _opened(p) as f:
        st = os.fstat(f.fileno())
        if f.read(4) != b"\x7fELF":
            raise NotELFError(f"{path}: not an ELF file")
        f.seek(0)
        # A container's file keeps its /proc/PID/root path: resolving it would name the
        # host's. Else the file opened, as the kernel names it (a /proc/self/fd/N too).
        if CONTAINER_PATH.match(str(p)):
            real = str(p.absolute())
        else:
            real = os.readlink(f"/proc/self/fd/{f.fileno()}")
        # ctime too: a file's owner can set its mtime back, not its ctime.
        key = (real, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, debug)
        with _CACHE_LOCK:
            if (hit := _CACHE.get(key)) is not None:
                _CACHE.move_to_end(key)
                return hit
        info = parse_elf(f, real, (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size), debug)
    with _CACHE_LOCK:
        _CACHE[key] = info
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return info


def entry_bytes(path: str, sym: FunctionSymbol, n: int = 16) -> bytes:
    """The first N bytes at a function's entry (16: an x86 instruction is at most 15)."""
    if sym.file_offset is None:
        return b""
    with open(path, "rb") as f:
        f.seek(sym.file_offset)
        return f.read(n)
