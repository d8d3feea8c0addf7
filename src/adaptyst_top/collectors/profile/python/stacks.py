"""A sample's Python frames joined to its native stack: the kernel's event of code
objects (sampler_py.py) is held until the stack event of the same thread and time, its
code objects named (names.py) and interleaved (interleave.py)."""

from __future__ import annotations

import re
from collections import OrderedDict

from adaptyst_top.collectors.profile.python.interleave import entries, groups, interleave
from adaptyst_top.collectors.profile.python.names import CodeNames
from adaptyst_top.collectors.profile.python.offsets import OFFSETS
from adaptyst_top.collectors.profile.sampler import Event
from adaptyst_top.collectors.profile.unwind import Frame, Stack
from adaptyst_top.snapshot.profile import PYTHON

MAX_HELD = 4096  # threads whose frames wait for their stack
MAX_PROCESSES = 1024
UNNAMED = "<python>"  # a code object whose memory could not be read
_NAME = re.compile(r"/(?:lib)?python3\.(\d+)[a-z]*(?:\.so[.0-9]*)?$")


def python_version(pid: int) -> tuple[int, int] | None:
    """The CPython version PID maps (its libpython or executable), by the file's name."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and (m := _NAME.search(parts[5].strip())):
                    version = (3, int(m.group(1)))
                    if version in OFFSETS:
                        return version
    except (OSError, ValueError):
        return None
    return None


class PythonStacks:
    def __init__(self) -> None:
        self._held: OrderedDict[int, tuple[int, tuple[int, ...]]] = OrderedDict()
        self._procs: OrderedDict[int, CodeNames | None] = OrderedDict()

    def hold(self, e: Event) -> None:
        self._held[e.tid] = (e.t, e.py)
        if len(self._held) > MAX_HELD:
            self._held.popitem(last=False)

    def _names(self, pid: int) -> CodeNames | None:
        if pid not in self._procs:
            version = python_version(pid)
            self._procs[pid] = CodeNames(pid, version) if version else None
            if len(self._procs) > MAX_PROCESSES:
                old = self._procs.popitem(last=False)[1]
                if old is not None:
                    old.close()
        return self._procs[pid]

    def merged(self, e: Event, stack: Stack) -> Stack:
        """STACK with E's thread's Python frames in it, where the kernel sent them."""
        held = self._held.pop(e.tid, None)
        if held is None or held[0] != e.t or not held[1]:
            return stack
        names = self._names(e.pid)
        if names is None:
            return stack
        python = []
        for code, first in entries(names.version, held[1]):
            n = names.name(code)
            frame = (
                Frame(n.filename, n.qualname, "", PYTHON, n.line)
                if n is not None
                else Frame("", UNNAMED, "", PYTHON)
            )
            python.append((frame, first))
        frames = interleave(stack.frames, [f.name for f in stack.frames], groups(python))
        return Stack(tuple(f for f in frames if isinstance(f, Frame)), stack.complete)
