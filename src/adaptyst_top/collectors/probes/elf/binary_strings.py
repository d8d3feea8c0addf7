"""C strings read from a probed binary's file, for a process that is gone.

A USDT argument that points into a page the target has not touched (its read-only data)
cannot be read by the probe; user space reads it through /proc/PID/mem later. A process
that makes its hits and exits within one read interval (a short command run under
`record`) leaves no memory to read. Its read-only segments are the binary's own bytes,
though: the probe's instruction pointer, less the site's link-time address, is where the
binary was loaded, and places the string in the file.
"""

from __future__ import annotations

import mmap
import os
import stat
import threading

from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo
from adaptyst_top.collectors.probes.engine.attach_plan import find_usdt
from adaptyst_top.collectors.probes.spec import ProbeSpec


class BinaryStrings:
    """The read-only loadable bytes of the one ELF file ELF was read from, opened once
    (and only if it is still that file), and the link-time addresses of each slot's
    probe sites. Nothing is read once the file has changed."""

    def __init__(self, source: str, elf: ElfInfo, sites: dict[int, tuple[int, ...]]) -> None:
        self.sites = sites
        self.fixed = elf.fixed
        self.segments: tuple[tuple[int, int, int], ...] = ()
        self.identity = elf.identity
        # A read never meets an fd closed (and its number reused) under it.
        self._lock = threading.Lock()
        # Non-blocking and never a controlling terminal: a path swapped since it was
        # read is opened without effect, then dropped as not the file.
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
        self._fd: int | None = os.open(source, flags)
        try:
            if self._unchanged(self._fd):
                self.segments = tuple(
                    (start, size, offset)
                    for start, size, offset in elf.readonly
                    if offset + size <= self.identity[3]
                )
        finally:
            if not self.segments:
                self.close()

    def _unchanged(self, fd: int) -> bool:
        st = os.fstat(fd)
        now = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size)
        return stat.S_ISREG(st.st_mode) and now == self.identity

    def load_bias(self, slot: int, ip: int) -> int | None:
        """Where the binary was loaded, from a hit at IP of SLOT's probe; None unless
        exactly one site explains it (a load bias is page-aligned, 0 for ET_EXEC)."""
        sites = self.sites.get(slot, ())
        if self.fixed:
            return 0 if ip in sites else None
        found = {ip - a for a in sites if ip >= a and (ip - a) % mmap.PAGESIZE == 0}
        return found.pop() if len(found) == 1 else None

    def string_at(self, slot: int, ip: int, address: int, limit: int) -> bytes | None:
        """At most LIMIT bytes of the C string at ADDRESS, as the process had it mapped
        from this file; None when it is not in the file's read-only bytes."""
        bias = self.load_bias(slot, ip)
        if bias is None:
            return None
        vaddr = address - bias
        for start, size, offset in self.segments:
            if start <= vaddr < start + size:
                want = min(limit + 1, start + size - vaddr)  # never past the segment
                data = self._read(want, offset + vaddr - start)
                return None if data is None else data.split(b"\0", 1)[0][:limit]
        return None

    def _read(self, n: int, offset: int) -> bytes | None:
        with self._lock:
            if self._fd is None:
                return None
            try:
                fd = os.dup(self._fd)
            except OSError:
                return None
        try:  # outside the lock: a slow file system holds up this read, not close()
            return os.pread(fd, n, offset) if self._unchanged(fd) else None
        except (OSError, OverflowError, ValueError):
            return None
        finally:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def binary_strings(source: str, elf: ElfInfo, spec: ProbeSpec, slot: int) -> BinaryStrings | None:
    """The file SOURCE for the strings SPEC's argument (read in SLOT) points to; None
    when it cannot be opened (the strings of a gone process then stay unread)."""
    assert spec.provider is not None and spec.name is not None
    sites = tuple(p.address for p in find_usdt(elf, source, spec.provider, spec.name))
    try:
        return BinaryStrings(source, elf, {slot: sites})
    except OSError:
        return None
