"""Where bcc 0.26 falls short, in one place: kernel features its Python binding does not
reach (through its libbcc and bpf(2) directly, so that the kernel, not our process,
undoes them), and the workarounds for its bugs.

- a uprobe whose USDT semaphore the kernel manages (perf's `ref_ctr_offset`): raised
  in each probed process while the probe is attached, lowered when it goes, even if
  the monitor is SIGKILLed (bcc's own way writes the target's memory and relies on
  its destructor to write it back);
- BPF_ENABLE_STATS (kernel >= 5.8): BPF run-time statistics on for as long as a file
  descriptor is held; the kernel counts holders and drops ours when we exit, however
  we exit (writing kernel.bpf_stats_enabled can leave it on for everybody);
- uprobes attached at file offsets the caller placed, libbcc resolving nothing;
- libbcc's complaints kept off our stderr, one compilation at a time (its clang front
  end is not thread-safe).
"""

from __future__ import annotations

import contextlib
import ctypes as ct
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

_NR_BPF = 321  # x86-64
_BPF_ENABLE_STATS = 32
_BPF_STATS_RUN_TIME = 0
_libc = ct.CDLL(None, use_errno=True)
_attach: Any = None


def enable_run_time_stats() -> int:
    """A descriptor that keeps BPF run-time statistics on until it is closed."""
    attr = (ct.c_uint32 * 2)(_BPF_STATS_RUN_TIME, 0)
    fd = int(_libc.syscall(_NR_BPF, _BPF_ENABLE_STATS, ct.byref(attr), ct.sizeof(attr)))
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def _libbcc() -> Any:
    """libbcc with prototypes of our own (bcc's binding declares bpf_attach_uprobe with
    six arguments; it has a seventh, ref_ctr_offset)."""
    global _attach
    if _attach is None:
        from bcc import libbcc  # type: ignore[import-not-found]

        own = ct.CDLL(libbcc.lib._name, use_errno=True)
        fn = own.bpf_attach_uprobe
        fn.restype = ct.c_int
        fn.argtypes = [ct.c_int, ct.c_int, ct.c_char_p, ct.c_char_p, ct.c_ulonglong]
        fn.argtypes += [ct.c_int, ct.c_uint32]
        own.bpf_detach_uprobe.restype = ct.c_int
        own.bpf_detach_uprobe.argtypes = [ct.c_char_p]
        _attach = own
    return _attach


def attach_with_semaphore(
    bpf: Any, path: str, addr: int, fn_name: str, pid: int, ref_ctr_offset: int
) -> None:
    """bcc's attach_uprobe(name=path, addr=addr, fn_name=..., pid=...), with the kernel
    holding the USDT semaphore at file offset REF_CTR_OFFSET; detach_uprobe undoes it."""
    from bcc import BPF  # type: ignore[import-not-found]

    name, offset = BPF._check_path_symbol(path.encode(), b"", addr, pid, 0)
    _attach_uprobe(bpf, name, offset, fn_name, pid, False, ref_ctr_offset)


def attach_at_offset(
    bpf: Any, path: str, offset: int, fn_name: str, pid: int, ret: bool, ref_ctr_offset: int
) -> None:
    """A uprobe (a uretprobe when RET) at the file OFFSET of PATH, checked by the caller
    in the file's executable segments: libbcc neither resolves a name nor reads the file
    (bcc's attach_uprobe does both, as root, on what may be a user's file)."""
    _attach_uprobe(bpf, path.encode(), offset, fn_name, pid, ret, ref_ctr_offset)


def detach_at_offset(bpf: Any, path: str, offset: int, pid: int, ret: bool) -> None:
    """Undo attach_at_offset (as bcc's detach_uprobe would, without its resolution)."""
    bpf.detach_uprobe_event(
        bpf._get_uprobe_evname(b"r" if ret else b"p", path.encode(), offset, pid)
    )


def _attach_uprobe(
    bpf: Any, path: bytes, offset: int, fn_name: str, pid: int, ret: bool, ref_ctr: int
) -> None:
    from bcc import BPF

    ev_name = bpf._get_uprobe_evname(b"r" if ret else b"p", path, offset, pid)
    if ev_name in bpf.uprobe_fds:
        # bcc keeps one descriptor per name: a second would hide the first from detach.
        raise OSError(f"another probe of this module is attached at offset {offset:#x}")
    fn = bpf.load_func(fn_name.encode(), BPF.KPROBE)
    lib = _libbcc()
    fd = lib.bpf_attach_uprobe(fn.fd, 1 if ret else 0, ev_name, path, offset, pid, ref_ctr)
    if fd < 0:
        errno = ct.get_errno()
        # Where the kernel's uprobe PMU refused (a process exiting meanwhile), libbcc
        # falls back to a tracefs event, makes it, fails to open it for PID and leaves
        # it behind: one event for good per child that exits while joining. Removed here
        # (libbcc removes only an event that is there).
        lib.bpf_detach_uprobe(ev_name)
        raise OSError(errno, f"Failed to attach BPF to {'uretprobe' if ret else 'uprobe'}")
    bpf._add_uprobe_fd(ev_name, fd)


_STDERR_LOCK = threading.Lock()


@contextlib.contextmanager
def bcc_stderr_captured() -> Iterator[list[str]]:
    """libbcc prints its complaints (\"cannot attach uprobe, probe entry may not exist\")
    straight to file descriptor 2, beside our own one-line error. While attaching, fd 2
    goes to an unnamed temporary file instead; its lines are handed back to the caller."""
    lines: list[str] = []
    with _STDERR_LOCK, tempfile.TemporaryFile() as sink:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode(errors="replace").splitlines())
