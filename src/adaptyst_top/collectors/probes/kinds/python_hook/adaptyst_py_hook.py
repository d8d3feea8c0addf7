"""The timing half of adaptyst-top's Python hook (sitecustomize.py decides when it is
needed and imports it then): times each call of the functions the probes name, and a
thread of its own hands the times every 0.1 s to the Python layer (python_layer.c)
through ctypes, which lets the GIL go and hands them 64 at a time to the kernel's probe
on its USDT site, to count and time exactly: that work is never inside a probed call.

Probes: (FILE, FUNC) globs over the .py path and the qualified name; `update` replaces
them while the program runs. Runs on CPython 3.8 and later:
- 3.12 and later: sys.monitoring. The first call of each function is looked at once;
  one the probes do not name is never looked at again (DISABLE), so other functions pay
  nothing; a probed one reports its start and its return or unwind. A new set of probes
  looks at every function once more (restart_events).
- before: the profile hook (sys.setprofile, threading.setprofile), which every Python
  call passes through.
A generator's or coroutine's time runs from each resumption to each suspension. A call
is timed only when its start and its end were both seen under a probe: one under way
when the set changes is left out, never paired with another's end.
Nothing of the program's changes; any failure here turns the hook off, never the program.
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import ctypes
import fnmatch
import os
import stat
import sys
import threading
import time

MYPY = False  # for the type checker only: typing is not imported into the program
if MYPY:
    from collections.abc import Callable, Sequence
    from types import CodeType, FrameType
    from typing import Any

    Probes = Sequence[tuple[str, str]]

_FLUSH_S = 0.1  # the hand-over thread's period
_TELL_AGAIN_S = 1.0  # long names told again this often (layer_common.h's TELL_AGAIN_NS)
_HELD_MAX = 4096  # calls held between two: past this, the call that ends hands them over
_KEY_LEN = 32
_HASHED_PREFIX = 22


def _key(text: str) -> bytes:
    """The row's key, as layer_common.h's key_text makes it."""
    raw = text.encode("utf-8", "replace")
    if len(raw) < _KEY_LEN:
        return raw
    h = 2166136261
    for b in raw:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return raw[:_HASHED_PREFIX] + b"~" + b"%08x" % h


_DEFS: dict[str, dict[tuple[int, str], str]] = {}


def _qualname(code: CodeType) -> str:
    """Its qualified name: the code object's own from 3.11; before, from its definition
    in its file (the hook runs in the target's interpreter, apart from the package). Its
    bare name where the file cannot say; nothing here ever raises into the program."""
    own = getattr(code, "co_qualname", None)
    if own:
        return str(own)
    path = code.co_filename
    if path not in _DEFS:
        _DEFS[path] = {}
        with contextlib.suppress(Exception):
            _DEFS[path] = _definitions(path)
    return _DEFS[path].get((code.co_firstlineno, code.co_name), code.co_name)


def _definitions(path: str) -> dict[tuple[int, str], str]:
    import ast  # before 3.11 only: later code objects know their qualified names

    found: dict[tuple[int, str], str] = {}
    # A regular file only (a FIFO or a device is never opened: its open would act).
    handle = os.open(path, getattr(os, "O_PATH", 0) | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return found
        with open(f"/proc/self/fd/{handle}", "rb") as f:
            tree = ast.parse(f.read(1 << 22))
    finally:
        os.close(handle)
    todo: list[tuple[ast.AST, str]] = [(tree, "")]  # a loop: the program's stack is its own
    while todo:
        node, prefix = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = prefix + child.name
                for at in [child.lineno] + [d.lineno for d in child.decorator_list]:
                    found[(at, child.name)] = qual
                inner = "." if isinstance(child, ast.ClassDef) else ".<locals>."
                todo.append((child, qual + inner))
            else:
                todo.append((child, prefix))
    return found


class Hook:
    def __init__(self, probes: Probes, layer: str) -> None:
        self.probes = list(probes)
        self.lib = ctypes.CDLL(layer)
        self.lib.adaptyst_py_timed.argtypes = [
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_uint64,
        ]
        self.lib.adaptyst_py_probed.restype = ctypes.c_int
        self.lib.adaptyst_py_name_wanted.restype = ctypes.c_uint
        self.lib.adaptyst_py_name.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self.whole: dict[bytes, bytes] = {}  # a long name's key -> the name
        self.told: set[bytes] = set()  # the keys told since told_at
        self.told_at = 0.0
        self.lock = threading.Lock()
        self.pending: list[tuple[bytes, int]] = []  # (key, ns), appended without a lock
        # code -> its key; None: not probed. Changed in place only (readers hold it).
        self.keys: dict[CodeType, bytes | None] = {}
        self.local = threading.local()
        self.looked_again: Callable[[], None] = lambda: None
        self.off: Callable[[], None] = lambda: None

    def match(self, code: CodeType) -> bytes | None:
        name = _qualname(code)
        # A script run by a relative path keeps it (3.8): from the folder it ran in.
        where = code.co_filename
        if not where.startswith("<") and not os.path.isabs(where):
            with contextlib.suppress(OSError):  # its folder may be gone
                where = os.path.abspath(where)
        for path, func in self.probes:
            if fnmatch.fnmatchcase(where, path) and fnmatch.fnmatchcase(name, func):
                key = _key(name)
                if len(key) == _KEY_LEN - 1 and key != name.encode("utf-8", "replace"):
                    self.whole[key] = name.encode("utf-8", "replace")
                return key
        return None

    def key_of(self, code: CodeType) -> bytes | None:
        key = self.keys.get(code, _UNSEEN)
        if key is _UNSEEN:
            key = self.keys[code] = self.match(code)
        return key  # type: ignore[return-value]

    def hand_over(self) -> None:
        """The hook's thread: the calls timed, handed over every FLUSH_S (a daemon: it
        ends with the program; the last are handed over at exit)."""
        sleep, flush = time.sleep, self.flush
        while True:
            sleep(_FLUSH_S)
            if self.pending:
                flush()

    def update(self, probes: Probes) -> None:
        """Time the functions PROBES name from now on (the monitor's new set)."""
        self.probes = list(probes)
        for code in list(self.keys):
            self.keys[code] = self.match(code)
        self.looked_again()
        self.flush()

    def exit(self) -> None:
        """At the program's exit (before its modules are torn down, when the hook's
        callbacks could no longer run): the last calls handed over, the hook off."""
        self.off()
        self.flush()

    def timers(
        self,
    ) -> tuple[Callable[[CodeType], None], Callable[[CodeType, bytes | None], None]]:
        """(started, ended): the per-call work, its names bound once (a call of the probed
        function pays for these two alone: the hand-over is the hook's own thread's). A
        start is kept with its code: an end pairs with the latest start of its own code
        (starts above it are of calls whose end was not seen: dropped), never another's."""
        now, tls, pending = time.perf_counter_ns, self.local, self.pending
        flush, add = self.flush, self.pending.append

        def started(code: CodeType) -> None:
            try:
                tls.stack.append((code, now()))
            except AttributeError:
                tls.stack = [(code, now())]

        def ended(code: CodeType, key: bytes | None) -> None:
            t = now()
            try:
                stack = tls.stack
            except AttributeError:
                return
            i = len(stack) - 1
            while i >= 0 and stack[i][0] is not code:
                i -= 1
            if i < 0:
                return  # begun before it was probed
            begun = stack[i][1]
            del stack[i:]
            if key is None:
                return  # no longer probed
            add((key, t - begun))  # one append: atomic under the GIL
            if len(pending) >= _HELD_MAX:
                flush()

        return started, ended

    def flush(self) -> None:
        """The calls so far, handed over (one thread at a time; calls appended meanwhile
        stay for the next)."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            taken = self.pending[: len(self.pending)]
            del self.pending[: len(taken)]
        finally:
            self.lock.release()
        n = len(taken)
        if n and self.whole:
            self.tell()
        # The layer's call lets the GIL go: the probe's work runs beside the program's.
        if n and self.lib.adaptyst_py_probed():  # no probe holds the site: nothing to hand
            self.lib.adaptyst_py_timed(
                (ctypes.c_char_p * n)(*(k for k, _ in taken)),
                (ctypes.c_uint64 * n)(*(t for _, t in taken)),
                n,
            )

    def tell(self) -> None:
        """Long names whole, to a monitor holding the name site: a new one at once, and
        all again every _TELL_AGAIN_S (layer_common.h's TELL_NAMES says why)."""
        if not self.lib.adaptyst_py_name_wanted():
            return
        now = time.monotonic()
        if now - self.told_at >= _TELL_AGAIN_S:
            self.told_at, self.told = now, set()
        for key, whole in list(self.whole.items()):
            if key not in self.told:
                self.lib.adaptyst_py_name(key, whole)
                self.told.add(key)


_UNSEEN = object()


def _monitoring(hook: Hook) -> None:
    """The hook as a sys.monitoring tool. A new set of probes registers the tool anew:
    a fresh registration looks at every function once more, where restart_events would
    also undo what the program's own tools set aside (DISABLE)."""
    mon: Any = getattr(sys, "monitoring")  # noqa: B009 (3.12 and later only)
    ev = mon.events
    locals_ = ev.PY_RETURN | ev.PY_YIELD | ev.PY_RESUME
    keys, disable, unseen, key_of = hook.keys, mon.DISABLE, _UNSEEN, hook.key_of
    started, ended = hook.timers()
    held: list[int] = []  # the tool id while registered

    # Never raising into the program: a callback that fails sets its place aside.
    def start(code: CodeType, offset: int) -> Any:
        try:
            key = keys.get(code, unseen)
            if key is unseen:
                key = key_of(code)
                if key is not None:
                    mon.set_local_events(held[0], code, locals_)
            if key is None:
                return disable  # not looked at again (until a new set of probes)
            started(code)
        except Exception:
            return disable
        return None

    def thrown(code: CodeType, offset: int, exc: BaseException) -> None:
        # A generator resumed by throw() or close() (a global event, never disabled).
        with contextlib.suppress(Exception):
            if keys.get(code) is not None:
                started(code)

    def end(code: CodeType, offset: int, value: object) -> Any:
        try:
            key = keys.get(code)
            ended(code, key)
        except Exception:
            return disable
        return disable if key is None else None

    def unwind(code: CodeType, offset: int, exc: BaseException) -> None:
        with contextlib.suppress(Exception):  # PY_UNWIND cannot be disabled: every one
            if code in keys:
                ended(code, keys[code])

    callbacks = (
        (ev.PY_START, start),
        (ev.PY_RESUME, start),
        (ev.PY_THROW, thrown),
        (ev.PY_RETURN, end),
        (ev.PY_YIELD, end),
        (ev.PY_UNWIND, unwind),
    )

    def off() -> None:
        if held:
            tool = held.pop()
            mon.set_events(tool, 0)
            for event, _ in callbacks:
                mon.register_callback(tool, event, None)
            mon.free_tool_id(tool)

    def on() -> None:
        off()
        # From the last id down: 0 is the debugger's, 2 the profiler's (pdb, cProfile).
        tool = next(i for i in range(5, -1, -1) if mon.get_tool(i) is None)
        mon.use_tool_id(tool, "adaptyst-top")
        held.append(tool)
        for event, callback in callbacks:
            mon.register_callback(tool, event, callback)
        for code, key in list(keys.items()):
            if key is not None:
                mon.set_local_events(tool, code, locals_)
        mon.set_events(tool, ev.PY_START | ev.PY_UNWIND | ev.PY_THROW)

    hook.looked_again, hook.off = on, off
    on()


def _profile(hook: Hook) -> None:
    keys, key_of = hook.keys, hook.key_of
    started, ended = hook.timers()

    def profiler(frame: FrameType, event: str, arg: object) -> None:
        try:
            if event == "call":
                code = frame.f_code
                if key_of(code) is not None:
                    started(code)
            elif event == "return":
                code = frame.f_code
                if code in keys:
                    ended(code, keys[code])
        except Exception:
            pass  # never into the program

    def off() -> None:
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)

    hook.off = off
    threading.setprofile(profiler)
    sys.setprofile(profiler)


def live_updates() -> bool:
    """Whether a hook installed later reaches every thread (sys.monitoring: 3.12+)."""
    return hasattr(sys, "monitoring")


def install(probes: Probes, layer: str) -> Hook:
    """Time PROBES' calls from now on, on every thread (before 3.12: this thread and the
    threads started later: call it before any other starts)."""
    hook = Hook(probes, layer)
    if live_updates():
        _monitoring(hook)
    else:
        _profile(hook)
    atexit.register(hook.exit)

    def hand_over() -> None:  # not among threading's threads: nothing the program counts
        _thread.start_new_thread(hook.hand_over, ())

    hand_over()
    os.register_at_fork(after_in_child=hand_over)  # a forked child has only its own thread
    return hook
