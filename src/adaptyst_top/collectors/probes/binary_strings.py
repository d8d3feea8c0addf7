"""C strings read from a probed binary's file, for a process that is gone.

A USDT argument that points into a page the target has not touched (its read-only data)
cannot be read by the probe; user space reads it through /proc/PID/mem later. A process
that makes its hits and exits within one read interval (a short command run under
`record`) leaves no memory to read. Its read-only segments are the binary's own bytes,
though: the probe's instruction pointer, less the site's link-time address, is where the
binary was loaded, and places the string in the file.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable, Mapping

from elftools.common.exceptions import ELFError
from elftools.elf.constants import P_FLAGS
from elftools.elf.elffile import ELFFile

from adaptyst_top.collectors.probes.elf_info import ElfInfo
from adaptyst_top.collectors.probes.spec import ProbeSpec

PAGE = 4096


class BinaryStrings:
    """The read-only loadable bytes of one ELF file, opened once (never by path again),
    and the link-time addresses of each slot's probe sites."""

    def __init__(self, source: str, sites: Mapping[int, Iterable[int]]) -> None:
        self.sites = {slot: tuple(a) for slot, a in sites.items()}
        # A read never meets an fd closed (and its number reused) under it.
        self._lock = threading.Lock()
        # Non-blocking: a path swapped for a FIFO since it was planned is not waited on.
        self._fd: int | None = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        self.segments: tuple[tuple[int, int, int], ...] = ()
        try:
            if not stat.S_ISREG(os.fstat(self._fd).st_mode):
                return
            with os.fdopen(os.dup(self._fd), "rb") as f:
                # (p_vaddr, p_filesz, p_offset) of each segment the process cannot write:
                # what is there in memory is what is in the file.
                self.segments = tuple(
                    (int(s["p_vaddr"]), int(s["p_filesz"]), int(s["p_offset"]))
                    for s in ELFFile(f).iter_segments()
                    if s["p_type"] == "PT_LOAD" and not s["p_flags"] & P_FLAGS.PF_W
                )
        except (ELFError, OSError, ValueError):
            pass  # nothing read from it: strings of a gone process stay unread

    def load_bias(self, slot: int, ip: int) -> int | None:
        """Where the binary was loaded, from a hit at IP of SLOT's probe; None unless
        exactly one site explains it (a load bias is page-aligned)."""
        found = {ip - a for a in self.sites.get(slot, ()) if ip >= a and (ip - a) % PAGE == 0}
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
                with self._lock:
                    if self._fd is None:
                        return None
                    try:
                        data = os.pread(self._fd, want, offset + vaddr - start)
                    except OSError:
                        return None
                return data.split(b"\0", 1)[0][:limit]
        return None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def binary_strings(source: str, elf: ElfInfo, spec: ProbeSpec, slot: int) -> BinaryStrings | None:
    """The file SOURCE for the strings SPEC's argument (read in SLOT) points to; None
    when it cannot be opened (the strings of a gone process then stay unread)."""
    sites = [p.address for p in elf.usdt if p.provider == spec.provider and p.name == spec.name]
    try:
        return BinaryStrings(source, {slot: sites})
    except OSError:
        return None
