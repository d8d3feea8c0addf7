"""Multi-uprobe links (kernel >= 6.6): one BPF program on many offsets of one file,
attached by one BPF_LINK_CREATE call, with a cookie per offset telling the program which
row fired, and the process it is for (or every one).

bcc 0.26 loads such a program (`load_func(..., attach_type=BPF_TRACE_UPROBE_MULTI)`) but
cannot attach it, so the link is made here through bpf(2). The kernel, not our process,
owns what a link attached: closing its descriptor (or our exit, SIGKILL included) takes
every probe of it away. 2,152 libc functions attach in ~25 ms and detach in ~0.25 s
here, where one bcc attach_uprobe per function took ~30 ms each.

One offset the kernel refuses (a LOCK-prefixed first instruction, ENOTSUPP) fails the
whole link: planning refuses those first, and a link that still fails is split in
halves until the offsets it cannot take are found, so one bad function never takes
the others down.
"""

from __future__ import annotations

import contextlib
import ctypes as ct
import errno
import functools
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.snapshot import ProbeState
from adaptyst_top.snapshot.inert import inert

BPF_LINK_CREATE = 28
BPF_TRACE_UPROBE_MULTI = 48
BPF_F_UPROBE_MULTI_RETURN = 1
_NR_BPF = 321  # x86-64
_ATTR_SIZE = 64  # union bpf_attr up to link_create.uprobe_multi.pid
MIN_KERNEL = (6, 6)
DISABLE_ENV = "ADAPTYST_TOP_NO_UPROBE_MULTI"  # set: one uprobe per function, as before 6.6
_libc = ct.CDLL(None, use_errno=True)

# How a row the kernel would not attach says so (another tool may hold the function):
# `record` finds these rows by it, to stop rather than run the command unprobed.
KERNEL_REFUSED = "the kernel refused the probe"
# Why, when the function's first instruction is one uprobes cannot take (ENOTSUPP, 524):
# the function's own nature, like an entry check's refusal, not something in the way.
UNSUPPORTED = "not supported by uprobes"


def release_has_multi(release: str) -> bool:
    """Whether a kernel of this release (`uname -r`) has multi-uprobe links."""
    try:
        major, minor = (int(x) for x in release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= MIN_KERNEL


@functools.cache
def kernel_has_multi() -> bool:
    """Whether this kernel has multi-uprobe links (and they are not switched off)."""
    return not os.environ.get(DISABLE_ENV) and release_has_multi(os.uname().release)


def create_link(
    prog_fd: int, path: str, offsets: list[int], cookies: list[int], ret: bool, pid: int
) -> int:
    """One link of PROG_FD on OFFSETS of PATH (cookie i for offset i); its descriptor.
    PID 0: every process. Raises OSError with the kernel's errno."""
    n = len(offsets)
    offs = (ct.c_uint64 * n)(*offsets)
    cks = (ct.c_uint64 * n)(*cookies)
    cpath = ct.create_string_buffer(os.fsencode(path))
    attr = (ct.c_uint8 * _ATTR_SIZE)()
    base = ct.addressof(attr)
    # struct link_create: prog_fd, target_fd, attach_type, flags, then uprobe_multi:
    # path, offsets, ref_ctr_offsets, cookies (u64 pointers), cnt, flags, pid (u32).
    for off, value, ctype in (
        (0, prog_fd, ct.c_uint32),
        (8, BPF_TRACE_UPROBE_MULTI, ct.c_uint32),
        (16, ct.addressof(cpath), ct.c_uint64),
        (24, ct.addressof(offs), ct.c_uint64),
        (40, ct.addressof(cks), ct.c_uint64),
        (48, n, ct.c_uint32),
        (52, BPF_F_UPROBE_MULTI_RETURN if ret else 0, ct.c_uint32),
        (56, max(pid, 0), ct.c_uint32),
    ):
        ctype.from_address(base + off).value = value
    fd = int(_libc.syscall(_NR_BPF, BPF_LINK_CREATE, attr, _ATTR_SIZE))
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, os.strerror(err) if err != 524 else UNSUPPORTED)
    return fd


# Errors that name a bad offset rather than a bad call: worth splitting the link for.
_PER_OFFSET = frozenset((errno.EINVAL, 524, errno.EOPNOTSUPP, errno.EFAULT, errno.ENOENT))


def link_split(
    prog_fd: int, path: str, wanted: Mapping[int, int], ret: bool, pid: int, refused: dict[int, str]
) -> list[int]:
    """Link every cookie -> offset of WANTED; cookies the kernel refuses go to REFUSED
    (with why) and the rest still attach, in as few links as the refusals allow."""
    items = sorted(wanted.items(), key=lambda kv: kv[1])
    fds: list[int] = []

    def attempt(part: list[tuple[int, int]]) -> None:
        if not part:
            return
        try:
            fds.append(
                create_link(prog_fd, path, [o for _, o in part], [c for c, _ in part], ret, pid)
            )
        except OSError as exc:
            if exc.errno not in _PER_OFFSET:
                raise
            if len(part) == 1:
                refused[part[0][0]] = f"{KERNEL_REFUSED}: {exc.strerror}"
                return
            half = len(part) // 2
            attempt(part[:half])
            attempt(part[half:])

    try:
        attempt(items)
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return fds


@dataclass
class _PidLinks:
    entry: list[int] = field(default_factory=list)
    ret: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)
    cookies: frozenset[int] = frozenset()

    def fds(self) -> list[int]:
        """Entries first, returns last: no entry is seen without its return probed."""
        return self.entry + self.after + self.ret


class MultiLinks:
    """The links of one module's entry and return programs, per process.

    `relink` swaps a process's links for ones over a new set of offsets: the new ones go
    on before the old ones come off, so a function probed before and after is never
    unprobed in between; the programs see such a call twice meanwhile, and the frames
    they push carry the stack pointer so that the second sighting is not counted
    (bpf/program.py)."""

    def __init__(self, path: str, entry_fd: int, ret_fd: int, after_fd: int | None = None) -> None:
        """ENTRY_FD, RET_FD (AFTER_FD: where an interval starts again past a single-stepped
        entry): the programs, loaded as BPF_TRACE_UPROBE_MULTI."""
        self.path = path
        self._entry_fd = entry_fd
        self._ret_fd = ret_fd
        self._after_fd = after_fd
        self.after_refused: set[int] = set()  # cookies whose second probe the kernel refused
        self._links: dict[int, _PidLinks] = {}
        self._lock = threading.Lock()

    def relink(
        self, pid: int, wanted: Mapping[int, int], after: Mapping[int, int] | None = None
    ) -> dict[int, str]:
        """Make PID's (-1: every process) links cover exactly WANTED (cookie -> file
        offset), and AFTER (cookie -> where its interval starts again); the cookies the
        kernel refused, with why. OSError when nothing could be linked for a reason that
        is not an offset's (the process is gone...)."""
        with self._lock:
            old = self._links.get(pid)
            if old is not None and old.cookies == frozenset(wanted):
                return {}
            refused: dict[int, str] = {}
            new = _PidLinks()
            if wanted:
                # Returns first: an entry seen without its return probed would leave a
                # frame that no return pops.
                new.ret = link_split(self._ret_fd, self.path, wanted, True, pid, refused)
                good = {c: o for c, o in wanted.items() if c not in refused}
                try:
                    new.entry = link_split(self._entry_fd, self.path, good, False, pid, refused)
                    new.cookies = frozenset(c for c in wanted if c not in refused)
                    if after and self._after_fd is not None:
                        mine = {c: o for c, o in after.items() if c in new.cookies}
                        new.after = self._link_after(mine, pid)
                except OSError:
                    _close_all(new.fds())
                    raise
            if new.cookies:
                self._links[pid] = new
            else:
                _close_all(new.fds())
                self._links.pop(pid, None)
            if old is not None:
                _close_all(old.fds())
            return refused

    def _link_after(self, wanted: dict[int, int], pid: int) -> list[int]:
        """The second probes past single-stepped entries: one refused (or all, where the
        link fails as a whole) leaves its row timed from its entry (after_refused)."""
        refused: dict[int, str] = {}
        try:
            fds = link_split(self._after_fd or -1, self.path, wanted, False, pid, refused)
        except OSError:
            fds, refused = [], dict.fromkeys(wanted, "")
        self.after_refused |= set(refused)
        return fds

    def pids(self) -> list[int]:
        with self._lock:
            return list(self._links)

    def close(self) -> None:
        with self._lock:
            for links in self._links.values():
                _close_all(links.fds())
            self._links.clear()


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class _Refusable(Protocol):  # model.Row, which imports this module
    spec: ProbeSpec
    state: ProbeState
    error: str


def kernel_refusals(rows: Iterable[_Refusable]) -> list[str]:
    """A line per probe the kernel would not attach for something in its way (another
    tool's probe there: KERNEL_REFUSED), which a run would otherwise record as a row of
    0 calls with the reason only inside the JSON. A function uprobes cannot take at all
    (UNSUPPORTED) is the function's nature, as an entry check's refusal is: a glob goes
    on without it."""
    return [
        inert(f"{row.spec.text}: {row.error}")
        for row in list(rows)
        if row.state == "error" and KERNEL_REFUSED in row.error and UNSUPPORTED not in row.error
    ]
