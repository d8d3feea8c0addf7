"""Python frames put where they run among a thread's native frames: each native frame of
CPython's evaluation loop stands for the Python frames it ran (one before 3.11; from 3.11,
Python-to-Python calls stay in one loop, and the kernel marks where each loop began)."""

from __future__ import annotations

from collections.abc import Sequence

from adaptyst_top.collectors.profile.python.offsets import OFFSETS
from adaptyst_top.collectors.profile.python.sampler_py import SHIM_OWNER

EVAL_LOOPS = frozenset({"_PyEval_EvalFrameDefault"})
_ADDRESS = (1 << 56) - 1


def entries(version: tuple[int, int], raw: Sequence[int]) -> list[tuple[int, bool]]:
    """(code object's address, first frame of its loop) leaf first, from the kernel's
    words (sampler_py.py): a C-stack shim (3.12 and later) marks the frame above it."""
    o = OFFSETS[version]
    out: list[tuple[int, bool]] = []
    for word in raw:
        code, flag = word & _ADDRESS, word >> 56
        if "frame_owner" in o:
            if flag == SHIM_OWNER:
                if out:
                    out[-1] = (out[-1][0], True)
                continue
            out.append((code, False))
        else:
            out.append((code, bool(flag) if "frame_is_entry" in o else True))
    if out:  # the outermost frame began a loop, whatever the chain was cut at
        out[-1] = (out[-1][0], True)
    return out


def groups(frames: Sequence[tuple[object, bool]]) -> list[list[object]]:
    """Leaf-first frames cut after each loop's first frame: one group per loop."""
    out: list[list[object]] = []
    current: list[object] = []
    for frame, first in frames:
        current.append(frame)
        if first:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def interleave(
    native: Sequence[object], names: Sequence[str], python: list[list[object]]
) -> list[object]:
    """NATIVE frames (leaf first, NAMES their names) with each evaluation loop's frame
    replaced by its group of PYTHON frames; groups left over (the native unwind stopped
    short) go on the outer end."""
    out: list[object] = []
    left = list(python)
    tail: list[object] = []
    for frame, name in zip(native, names, strict=True):
        if name in EVAL_LOOPS and left:
            out.extend(left.pop(0))
        elif name == "[unknown]" and left:
            tail.append(frame)
        else:
            out.append(frame)
    for group in left:
        out.extend(group)
    return out + tail
