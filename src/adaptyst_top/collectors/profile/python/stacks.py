"""A sample's Python frames joined to its native stack: the kernel's event of code
objects (sampler_py.py) is held until the stack event of the same thread and time, its
code objects named (names.py) and interleaved (interleave.py)."""

from __future__ import annotations

from collections import OrderedDict

from adaptyst_top.collectors.profile.python.interleave import entries, groups, interleave
from adaptyst_top.collectors.profile.python.names import CodeNames
from adaptyst_top.collectors.profile.python.sampler_py import VERSIONS
from adaptyst_top.collectors.profile.sampler import Event
from adaptyst_top.collectors.profile.unwind import Frame, Stack
from adaptyst_top.snapshot.profile import PYTHON

MAX_HELD = 4096  # threads whose frames wait for their stack
MAX_PROCESSES = 1024
UNNAMED = "<python>"  # a code object whose memory could not be read


class PythonStacks:
    def __init__(self) -> None:
        # a thread -> (when, the version's index, its code objects)
        self._held: OrderedDict[int, tuple[int, int, tuple[int, ...]]] = OrderedDict()
        self._procs: OrderedDict[int, CodeNames] = OrderedDict()

    def hold(self, e: Event) -> None:
        self._held[e.tid] = (e.t, e.ip, e.py)
        if len(self._held) > MAX_HELD:
            self._held.popitem(last=False)

    def _names(self, pid: int, version: tuple[int, int]) -> CodeNames:
        """PID's code names read by VERSION's offsets (the kernel said which it walked;
        another after an exec)."""
        names = self._procs.get(pid)
        if names is not None and names.version != version:
            names.close()
            names = None
        if names is None:
            names = self._procs[pid] = CodeNames(pid, version)
            while len(self._procs) > MAX_PROCESSES:
                self._procs.popitem(last=False)[1].close()
        return names

    def merged(self, e: Event, stack: Stack) -> Stack:
        """STACK with E's thread's Python frames in it, where the kernel sent them."""
        held = self._held.pop(e.tid, None)
        if held is None or held[0] != e.t or not held[2] or not 0 <= held[1] < len(VERSIONS):
            return stack
        names = self._names(e.pid, VERSIONS[held[1]])
        python = []
        for code, first in entries(names.version, held[2]):
            n = names.name(code)
            frame = (
                Frame(n.filename, n.qualname, "", PYTHON, n.line)
                if n is not None
                else Frame("", UNNAMED, "", PYTHON)
            )
            python.append((frame, first))
        frames = interleave(stack.frames, [f.name for f in stack.frames], groups(python))
        return Stack(tuple(f for f in frames if isinstance(f, Frame)), stack.complete)
