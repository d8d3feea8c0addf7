"""Turns at bcc's compiler, shared fairly between their owners.

bcc's clang/LLVM front end is not thread-safe: one compilation at a time per process,
whichever engine asks. In the agent the engines are different users': with a plain
lock, one user's flood of compilations could keep another's waiting behind all of
them. Here the waiting owners are served in rotation (first come first within one), so
each waits for at most one compilation of each other owner.

A module's teardown (BPF.cleanup: bcc's module destructor, which edits the table
storage that compilations fill) takes a turn too, all teardowns as one owner: seen
without, fourteen sessions closing at once beside other users' compilations crashed
the agent inside libbcc's front end (two threads faulting at one address).

When the last waiting turn ends, what the compiler used is given back (system/heap.py):
its freed heap and its code's resident pages, ~200 MiB of a headless `record`."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator
from contextlib import AbstractContextManager, contextmanager

from adaptyst_top.system import heap


class CompileTurns:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: OrderedDict[Hashable, deque[object]] = OrderedDict()
        self._busy = False

    @contextmanager
    def turn(self, owner: Hashable = None) -> Iterator[None]:
        """Holds the compiler for OWNER's one compilation."""
        ticket = object()
        with self._cond:
            self._waiting.setdefault(owner, deque()).append(ticket)
            while self._busy or self._first() is not ticket:
                self._cond.wait()
            self._busy = True
            queue = self._waiting.pop(owner)
            queue.popleft()
            if queue:  # its next waits behind every other owner's first
                self._waiting[owner] = queue
        try:
            yield
        finally:
            with self._cond:
                idle = not self._waiting
            if idle:  # a compile waiting would only fault the pages back in
                # Still in the turn: no compile runs the code being dropped. Memory
                # given back is a saving, never a failure of the compile just done.
                with contextlib.suppress(Exception):
                    heap.give_back()
                    heap.drop_clean_pages()
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def teardown(self) -> AbstractContextManager[None]:
        """Holds the compiler for one module's cleanup."""
        return self.turn(_TEARDOWN)

    def _first(self) -> object | None:
        for queue in self._waiting.values():
            return queue[0]
        return None


_TEARDOWN = object()  # every cleanup's owner: they take turns with the users' compiles
COMPILE_TURNS = CompileTurns()
