"""The kernel half of Python frames: at each sample (and each stack copy of a thread
leaving the CPU) of a process running a known CPython, the thread's frame chain is
walked from `_PyRuntime` and its code objects' addresses sent, leaf first, as one event
of their own just before the stack's (same thread, same time). Names are read later, by
the unwinder (names.py). Plain helpers and fixed-size maps: the C moves unchanged into a
precompiled program; the offsets come in a map, the fsbase offset from the kernel's BTF.

Each frame's address carries, in its top byte, what says where an evaluation loop (a
native `_PyEval_EvalFrameDefault`) began: 1 for every frame before 3.11, `is_entry` in
3.11, the frame's owner from 3.12 (a C-stack shim marks the loop's start): interleave.py
reads it, so the two stacks interleave.
"""

from __future__ import annotations

import ctypes
import ctypes as ct
from typing import Any

from adaptyst_top.collectors.profile.python.detect import PythonProcess
from adaptyst_top.collectors.profile.python.offsets import OFFSETS

MAX_PY_FRAMES = 32  # deeper stacks keep their leaf-most 32 Python frames
MAX_THREADS = 16  # a process's threads walked to find the sampled one's state
VERSIONS = sorted(OFFSETS)
ENTRY_ALL, ENTRY_FLAG, ENTRY_SHIM = 0, 1, 2
SHIM_OWNER = 3  # FRAME_OWNED_BY_CSTACK (3.12, 3.13)


class PyOffs(ct.Structure):
    """`struct pyoffs` of frames.bpf.h."""

    _fields_ = [
        ("interp_head", ct.c_uint64),
        ("tstate_head", ct.c_uint64),
        ("tstate_next", ct.c_uint64),
        ("tstate_tid", ct.c_uint64),
        ("tid_native", ct.c_uint64),
        ("tstate_frame", ct.c_uint64),
        ("cframe_frame", ct.c_int64),
        ("frame_code", ct.c_uint64),
        ("frame_back", ct.c_uint64),
        ("entry_at", ct.c_uint64),
        ("entry_mode", ct.c_uint64),
    ]


class PyProc(ct.Structure):
    """`struct pyproc` of frames.bpf.h."""

    _fields_ = [("runtime", ct.c_uint64), ("ver", ct.c_uint32), ("pad", ct.c_uint32)]


MAP_TYPES: dict[str, tuple[Any, Any]] = {
    "pyoffs": (ct.c_uint32, PyOffs),
    "pyproc": (ct.c_uint32, PyProc),
}


def fill_offsets(table: Any) -> None:
    """The pyoffs map: one entry per CPython version offsets.py knows."""
    for i, version in enumerate(VERSIONS):
        o = OFFSETS[version]
        native = "tstate_native_thread_id" in o
        if "frame_owner" in o:
            mode, at = ENTRY_SHIM, o["frame_owner"]
        elif "frame_is_entry" in o:
            mode, at = ENTRY_FLAG, o["frame_is_entry"]
        else:
            mode, at = ENTRY_ALL, 0
        entry = table.Leaf(
            o["runtime_interp_head"],
            o["interp_tstate_head"],
            o["tstate_next"],
            o["tstate_native_thread_id"] if native else o["tstate_thread_id"],
            int(native),
            o["tstate_frame"],
            o["cframe_frame"],
            o["frame_code"],
            o["frame_back"],
            at,
            mode,
        )
        table[ctypes.c_int(i)] = entry


def register(table: Any, pid: int, found: PythonProcess) -> None:
    table[ctypes.c_uint(pid)] = table.Leaf(found.runtime, VERSIONS.index(found.version), 0)
