"""Memory given back to the node: glibc keeps what a client's session freed in its
arenas (one per thread that allocated, up to 8 per core), so the agent's RSS only grew
(when bcc still compiled in it: 40 MiB idle, 1,058 MiB after seven users' sessions had
closed, results/2026-12-03-agent-privsep.md). A bound on the arenas, and malloc_trim
after each client, give it back."""

from __future__ import annotations

import contextlib
import ctypes
import functools

_M_ARENA_MAX = -8
# One arena for every thread: the clients' threads come and go, and what each left in an
# arena of its own stayed (8 users' sessions closed: 61-72 MiB with 4 arenas, 60.4-60.7
# with one, against 57 idle; first probes and snapshots under load alike, within this
# machine's noise: results/2026-12-06-launch-memory.md).
ARENA_MAX = 1


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
