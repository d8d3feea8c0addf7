"""BPF_ENABLE_STATS (kernel >= 5.8): BPF run-time statistics on for as long as a file
descriptor is held. The kernel counts holders and drops ours when we exit, however we
exit (writing kernel.bpf_stats_enabled could leave it on for everybody)."""

from __future__ import annotations

import ctypes as ct
import os

_NR_BPF = 321  # x86-64
_BPF_ENABLE_STATS = 32
_BPF_STATS_RUN_TIME = 0
_libc = ct.CDLL(None, use_errno=True)


def enable_run_time_stats() -> int:
    """A descriptor that keeps BPF run-time statistics on until it is closed."""
    attr = (ct.c_uint32 * 2)(_BPF_STATS_RUN_TIME, 0)
    fd = int(_libc.syscall(_NR_BPF, _BPF_ENABLE_STATS, ct.byref(attr), ct.sizeof(attr)))
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, os.strerror(err))
    return fd
