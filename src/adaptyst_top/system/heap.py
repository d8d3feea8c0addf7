"""Memory given back to the node after bcc's compiler (LLVM) ran in the process.

- glibc keeps what a compile freed in its arenas (one per thread that allocated, up to
  8 per core), so the agent's RSS only grew (40 MiB idle, 1,058 MiB after seven users'
  sessions had closed: results/2026-12-03-agent-privsep.md). malloc_trim gives it back.
- A compile touches ~80 MiB of LLVM's and clang's code and read-only data, which then
  stay resident in the process for the rest of its life though nothing runs them until
  the next compile. Those pages are clean copies of the files: dropping them from the
  process costs a refault from the page cache at the next compile, and a headless
  `record` of three probes went from 309 to ~110 MiB
  (results/2026-12-03-first-minutes-memory-cpu.md)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import re
from collections.abc import Iterable, Iterator

_M_ARENA_MAX = -8
# Arenas in all: threads beyond share them. Each client is a thread; contention on a
# few arenas costs less here than the memory held by one arena per thread.
ARENA_MAX = 4


@functools.cache
def _libc() -> ctypes.CDLL | None:
    with contextlib.suppress(OSError):
        libc = ctypes.CDLL(None)
        if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt"):
            return libc
    return None  # not glibc: nothing to tune


def bound_arenas() -> None:
    """At most ARENA_MAX malloc arenas from now on (glibc's M_ARENA_MAX)."""
    if (libc := _libc()) is not None:
        libc.mallopt(_M_ARENA_MAX, ARENA_MAX)


def give_back() -> None:
    """Return the heap's free pages to the node (glibc's malloc_trim(0))."""
    if (libc := _libc()) is not None:
        libc.malloc_trim(0)


_MADV_DONTNEED = 4
COMPILER_LIBRARIES = ("libLLVM", "libclang")  # what bcc's compile alone runs
_MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$")


def clean_ranges(smaps: Iterable[str], names: Iterable[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of each mapping of a file whose path holds one of NAMES that is not
    writable and holds no page of its own (no anonymous, dirty or swapped page): its
    resident pages are the file's, so dropping them loses nothing."""
    names = tuple(names)
    current: tuple[int, int] | None = None
    own = 0

    def done() -> Iterator[tuple[int, int]]:
        if current is not None and own == 0:
            yield current

    for line in smaps:
        m = _MAPPING.match(line)
        if m:
            yield from done()
            start, end, perms, path = m.groups()
            wanted = "w" not in perms and any(n in path.rsplit("/", 1)[-1] for n in names)
            current = (int(start, 16), int(end, 16)) if wanted else None
            own = 0
            continue
        key, _, value = line.partition(":")
        if current is not None and key in (
            "Anonymous", "Private_Dirty", "Shared_Dirty", "Swap", "SwapPss",
        ):  # fmt: skip
            fields = value.split()
            own += int(fields[0]) if fields and fields[0].isdigit() else 1
    yield from done()


def drop_clean_pages(names: Iterable[str] = COMPILER_LIBRARIES) -> int:
    """Drop this process's resident pages of NAMES' clean, read-only mappings (they come
    back from the page cache when next run). Bytes of the ranges dropped; 0 where
    smaps or madvise are not there."""
    if (libc := _libc()) is None:
        return 0
    try:
        # A mapped path may be any bytes: read as the kernel wrote it, never an error.
        with open("/proc/self/smaps", encoding="utf-8", errors="surrogateescape") as f:
            ranges = list(clean_ranges(f, names))
    except (OSError, ValueError):
        return 0
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return sum(
        end - start for start, end in ranges if madvise(start, end - start, _MADV_DONTNEED) == 0
    )
