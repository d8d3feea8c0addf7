"""Where a process's code lies: its executable mappings from /proc/PID/maps, each with
the file it maps and how an address there turns into the file's link-time address."""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection

from adaptyst_top.collectors.probes.elf_info import ElfInfo, NotELFError, read_elf
from adaptyst_top.collectors.profile.cfi import CfiTable, cfi_for
from adaptyst_top.collectors.profile.vdso import vdso_path

VDSO = "[vdso]"


@dataclass(frozen=True, slots=True)
class Mapping:
    start: int
    end: int
    offset: int  # the file offset mapped at START
    # "" for anonymous memory (a JIT's, a trampoline's); "[vdso]" and the like have no file
    path: str
    inode: int = 0  # the mapped file's, as the kernel names it

    @property
    def has_file(self) -> bool:
        """Whether its code can be read: a file, or the kernel's vDSO (vdso.py)."""
        return self.path.startswith("/") or self.path == VDSO


def read_maps(pid: int) -> list[Mapping]:
    """PID's executable mappings, by address ([] when the process is gone)."""
    out = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) < 5 or "x" not in parts[1]:
                    continue
                lo, _, hi = parts[0].partition("-")
                path = parts[5].strip() if len(parts) > 5 else ""
                out.append(
                    Mapping(int(lo, 16), int(hi, 16), int(parts[2], 16), path, int(parts[4]))
                )
    except (OSError, ValueError):
        return []
    return sorted(out, key=lambda m: m.start)


DEBUG_DIR = "/usr/lib/debug/.build-id"


def build_id_of(path: str) -> str | None:
    """The GNU build ID of the ELF file at PATH, in hex (None: it has none)."""
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for section in elf.iter_sections():
                if not isinstance(section, NoteSection):
                    continue
                for note in section.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID" and isinstance(note["n_desc"], str):
                        return note["n_desc"]
    except Exception:  # pyelftools raises many kinds on bad bytes
        return None
    return None


class ProcessMaps:
    """A process's mappings, read again when an address falls outside them (a library
    loaded since)."""

    def __init__(self, pid: int, open_file: Callable[[str], int | None] | None = None) -> None:
        """OPEN_FILE: how a mapped file is opened by its path (the agent's unwinder, the
        profiled user's own process: agent/worker/open_files.open_regular, a regular file
        off FUSE); None: through the kernel's link to it, which only root may open
        (CAP_SYS_ADMIN)."""
        self.pid = pid
        self._open_file = open_file
        self._maps: list[Mapping] = []
        self._starts: list[int] = []
        self._elves: dict[str, ElfInfo | None] = {}
        self._cfi: dict[str, CfiTable] = {}
        # An address's frame and rule, as unwind.py found them (most samples repeat a few
        # thousand places: each is looked up once).
        self.places: dict[int, Any] = {}
        self.refresh()

    def refresh(self) -> None:
        self._maps = read_maps(self.pid)
        # An exec maps other files at the same paths and addresses.
        self._elves, self._cfi, self.places = {}, {}, {}
        self._starts = [m.start for m in self._maps]

    def _find(self, addr: int) -> Mapping | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._maps[i].end:
            return self._maps[i]
        return None

    def find(self, addr: int) -> Mapping | None:
        m = self._find(addr)
        if m is None and self._maps:
            self.refresh()
            m = self._find(addr)
        return m

    @contextlib.contextmanager
    def opened(self, m: Mapping) -> Iterator[str | None]:
        """Where the mapped file is read (None: nowhere). As root, the kernel's link to the
        very inode mapped there, never the path the maps name, which the process's owner
        controls (a symlink, a FIFO named as the file was, a container's own /). As the
        process's owner (the agent's unwinder), that path in the process's own root, a
        regular file off FUSE with the inode mapped: anything else is theirs to have
        faked."""
        if m.path == VDSO:
            yield vdso_path()
            return
        if self._open_file is None:
            yield f"/proc/{self.pid}/map_files/{m.start:x}-{m.end:x}"
            return
        fd = self._open_file(f"/proc/{self.pid}/root{m.path}")
        if fd is None:
            yield None
            return
        try:
            yield f"/proc/self/fd/{fd}" if os.fstat(fd).st_ino == m.inode else None
        finally:
            os.close(fd)

    def elf(self, m: Mapping) -> ElfInfo | None:
        if not m.has_file:
            return None
        if m.path not in self._elves:
            info = None
            with self.opened(m) as path, contextlib.suppress(OSError, NotELFError, ValueError):
                info = read_elf(path) if path is not None else None
            self._elves[m.path] = info
        return self._elves[m.path]

    def symbols_elf(self, m: Mapping, elf: ElfInfo) -> ElfInfo:
        """ELF's function names, from its separate debug file where the distribution
        ships one (Debian's -dbg packages: /usr/lib/debug/.build-id/XX/YYYY.debug, found
        by the build ID, as perf and gdb find it) and the file itself has no .symtab."""
        if not elf.stripped:
            return elf
        key = f"debug:{m.path}"
        if key not in self._elves:
            found = None
            with self.opened(m) as path:
                build_id = build_id_of(path) if path is not None else None
            if build_id and all(c in "0123456789abcdef" for c in build_id):
                # The host's debug files only: a container's would be its owner's.
                debug = f"{DEBUG_DIR}/{build_id[:2]}/{build_id[2:]}.debug"
                with contextlib.suppress(OSError, NotELFError, ValueError):
                    found = read_elf(debug)
            self._elves[key] = found
        return self._elves[key] or elf

    def cfi(self, m: Mapping) -> CfiTable:
        table = self._cfi.get(m.path)
        if table is None and not m.has_file:
            table = self._cfi[m.path] = CfiTable([])
        if table is None:
            with self.opened(m) as path:
                table = cfi_for(path) if path is not None else CfiTable([], errors=1)
            self._cfi[m.path] = table
        return table

    def vaddr(self, m: Mapping, addr: int, elf: ElfInfo) -> int | None:
        """ADDR in M as the file's link-time address (None outside its PT_LOADs)."""
        off = addr - m.start + m.offset
        for v, size, o in elf.loads:
            if o <= off < o + size:
                return off - o + v
        return None
