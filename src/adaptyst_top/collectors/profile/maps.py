"""Where a process's code lies: its executable mappings from /proc/PID/maps, each with
the file it maps and how an address there turns into the file's link-time address."""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from adaptyst_top.collectors.probes.elf.debug_files import read_debug_names
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, NotELFError, read_elf
from adaptyst_top.collectors.profile.cfi import CfiTable, cfi_for
from adaptyst_top.collectors.profile.vdso import vdso_path
from adaptyst_top.snapshot.profile import DYNSYM, SYMTAB

VDSO = "[vdso]"
REREAD_S = 0.05
MAX_DEBUG = 256
# A stripped file's names from its debug file, by the file's identity: looked for once
# per file, whichever process maps it and however often its maps are read again.
_DEBUG: dict[tuple[int, int, int, int], tuple[ElfInfo, str]] = {}
# Each file read through a live process, by device, inode and path: a process gone
# before its stacks were unwound (a 30 ms run) is read from what another process that
# mapped the same file gave (its open link died with it). This process's own: the
# agent's unwinder is one user's.
MAX_FILES = 256
_FILE_ELF: dict[tuple[str, int, str], ElfInfo] = {}
_FILE_CFI: dict[tuple[str, int, str], CfiTable] = {}


def _keep(cache: dict[tuple[str, int, str], Any], key: tuple[str, int, str], value: Any) -> None:
    cache[key] = value
    while len(cache) > MAX_FILES:
        cache.pop(next(iter(cache)))


@dataclass(frozen=True, slots=True)
class Mapping:
    start: int
    end: int
    offset: int  # the file offset mapped at START
    # "" for anonymous memory (a JIT's, a trampoline's); "[vdso]" and the like have no file
    path: str
    inode: int = 0  # the mapped file's, as the kernel names it
    dev: str = ""  # its device, as /proc/PID/maps writes it ("fd:01")

    @property
    def file_key(self) -> tuple[str, int, str]:
        return (self.dev, self.inode, self.path)

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
                    Mapping(
                        int(lo, 16), int(hi, 16), int(parts[2], 16), path, int(parts[4]), parts[3]
                    )
                )
    except (OSError, ValueError):
        return []
    return sorted(out, key=lambda m: m.start)


class ProcessMaps:
    """A process's mappings, read again when an address falls outside them (a library
    loaded since)."""

    def __init__(
        self,
        pid: int,
        open_file: Callable[[str], int | None] | None = None,
        early: Callable[[], list[Mapping] | None] | None = None,
    ) -> None:
        """OPEN_FILE: how a mapped file is opened by its path (the agent's unwinder, the
        profiled user's own process: agent/worker/open_files.open_regular, a regular file
        off FUSE); None: through the kernel's link to it, which only root may open
        (CAP_SYS_ADMIN). EARLY: its maps as last read while its events came in, for when
        it is gone (its files are then read as another process that mapped them gave)."""
        self.pid = pid
        self._early = early
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
        self._read_at = time.monotonic()
        self._maps = read_maps(self.pid) or (self._early and self._early()) or []
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
        # A range gone (the loader mapped over it), or an address outside every mapping (a
        # library loaded since; maps read while the process changed them): the maps are
        # read again, at most every REREAD_S.
        if time.monotonic() - self._read_at >= REREAD_S and (m is None or not self._current(m)):
            self.refresh()
            m = self._find(addr)
        return m

    def _current(self, m: Mapping) -> bool:
        """Whether M is still mapped as read: the dynamic loader maps a library whole,
        then its segments over it, and maps read in between name ranges that are gone
        (their files could not be opened, and every frame there would be nameless)."""
        if self._open_file is not None or not m.path.startswith("/"):
            return True
        return os.path.lexists(f"/proc/{self.pid}/map_files/{m.start:x}-{m.end:x}")

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
            if info is not None and m.inode:
                _keep(_FILE_ELF, m.file_key, info)
            elif info is None:
                info = _FILE_ELF.get(m.file_key)
            self._elves[m.path] = info
        return self._elves[m.path]

    def symbols_elf(self, m: Mapping, elf: ElfInfo) -> tuple[ElfInfo, str]:
        """ELF's function names and where they came from: the file's own symbol table,
        else its separate debug file (debug_files.py: the build-ID tree, its debug link,
        debuginfod), else its exported names alone."""
        if not elf.stripped:
            return elf, SYMTAB
        found = _DEBUG.get(elf.identity)
        if found is None:
            folder = os.path.dirname(m.path)
            with self.opened(m) as path:
                named = (
                    read_debug_names(path, f"/proc/{self.pid}/root{folder}", folder)
                    if path is not None
                    else None
                )
            found = named if named is not None else (elf, DYNSYM)
            if path is None:
                return found  # not looked for (the process is gone): not settled
            _DEBUG[elf.identity] = found
            while len(_DEBUG) > MAX_DEBUG:
                _DEBUG.pop(next(iter(_DEBUG)))
        return found

    def cfi(self, m: Mapping) -> CfiTable:
        table = self._cfi.get(m.path)
        if table is None and not m.has_file:
            table = self._cfi[m.path] = CfiTable([])
        if table is None:
            with self.opened(m) as path:
                # A gone process's link is gone with it: read as another gave it.
                table = cfi_for(path) if path is not None and os.path.exists(path) else None
            if table is not None and m.inode:
                _keep(_FILE_CFI, m.file_key, table)
            elif table is None:
                table = _FILE_CFI.get(m.file_key) or CfiTable([], errors=1)
            self._cfi[m.path] = table
        return table

    def vaddr(self, m: Mapping, addr: int, elf: ElfInfo) -> int | None:
        """ADDR in M as the file's link-time address (None outside its PT_LOADs)."""
        off = addr - m.start + m.offset
        for v, size, o in elf.loads:
            if o <= off < o + size:
                return off - o + v
        return None
