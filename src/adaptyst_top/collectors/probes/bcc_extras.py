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
- libbcc's complaints kept off our stderr, one compilation at a time (its clang front
  end is not thread-safe), USDT(pid) contexts never freed (it closes a descriptor
  twice), and the USDT argument readers generated without bcc attaching anything.
"""

from __future__ import annotations

import atexit
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
        add = own.bcc_usdt_addsem_fully_specified_probe
        add.restype = ct.c_int
        add.argtypes = [ct.c_void_p, ct.c_char_p, ct.c_char_p, ct.c_char_p, ct.c_int16]
        _attach = own
    return _attach


def lower_bcc_semaphore(ctx: Any, provider: str, name: str, fn_name: str) -> None:
    """Undo the +1 that bcc's USDT(pid).enable_probe wrote into the target's semaphore."""
    rc = _libbcc().bcc_usdt_addsem_fully_specified_probe(
        ctx.context, provider.encode(), name.encode(), fn_name.encode(), -1
    )
    if rc != 0:
        raise OSError(f"cannot lower the semaphore of {provider}:{name}")


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

    fn = bpf.load_func(fn_name.encode(), BPF.KPROBE)
    ev_name = bpf._get_uprobe_evname(b"r" if ret else b"p", path, offset, pid)
    fd = _libbcc().bpf_attach_uprobe(fn.fd, 1 if ret else 0, ev_name, path, offset, pid, ref_ctr)
    if fd < 0:
        raise OSError(ct.get_errno(), f"Failed to attach BPF to {'uretprobe' if ret else 'uprobe'}")
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


# bcc 0.26 closes the /proc/PID/root descriptor of a PID USDT context twice, the second
# time when the context is destroyed, by which time another thread may own that
# descriptor number. Such contexts are kept here and never freed.
KEPT_USDT_CONTEXTS: list[Any] = []


class _KeptContext:
    """What a kept USDT context becomes at exit: no __del__ to run against a
    half-torn-down interpreter (bcc's own module globals are gone by then)."""


@atexit.register
def _keep_contexts_quiet() -> None:
    for ctx in KEPT_USDT_CONTEXTS:
        ctx.__class__ = _KeptContext


def usdt_readers(contexts: list[Any]) -> str:
    if not contexts:
        return ""
    from bcc.libbcc import lib

    arr = (ct.c_void_p * len(contexts))(*[c.get_context() for c in contexts])
    text = lib.bcc_usdt_genargs(arr, len(contexts))
    if text is None:
        raise RuntimeError("bcc could not generate the USDT argument readers")
    return str(text.decode() if isinstance(text, bytes) else text)


def usdt_context(
    pid: int | None,
    path: str,
    provider: str,
    names: list[str],
    slots: list[Any],
    ref_ctrs: dict[str, int],
) -> Any:
    """bcc's USDT context with each named probe enabled for its slot's program (by PID
    when the process maps PATH, else by path). A semaphore bcc raises by writing the
    target's memory is lowered again at once: the kernel holds it from the attach on
    (ref_ctr_offset)."""
    from bcc import USDT  # type: ignore[import-not-found]

    ctx = USDT(pid=pid) if pid else USDT(path=path)
    if pid:
        KEPT_USDT_CONTEXTS.append(ctx)  # never freed (above)
    for name, slot in zip(names, slots, strict=True):
        # USDT(pid) names the probe by provider:name to avoid clashes across libraries.
        ctx.enable_probe(probe=f"{provider}:{name}", fn_name=slot.fn_name)
        if name in ref_ctrs:
            lower_bcc_semaphore(ctx, provider, name, slot.fn_name)
    return ctx
