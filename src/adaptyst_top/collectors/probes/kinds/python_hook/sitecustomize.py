"""adaptyst-top's Python hook, run by every CPython a `python:` probe launches (it is
first on PYTHONPATH): times each call of the functions the probes name and hands the
times to the Python layer (python_layer.c) through ctypes, 64 at a time, for the
kernel's probe on its USDT site to count and time exactly. Then it runs the
sitecustomize it stands in front of, if there is one.

ADAPTYST_PY_PROBES: one probe a line, "FILE<TAB>FUNC" (globs over the .py path and the
qualified name); ADAPTYST_PY_LAYER: the layer's path. Runs on CPython 3.8 and later:
- 3.12 and later: sys.monitoring. The first call of each function is looked at once;
  one the probes do not name is never looked at again (DISABLE), so other functions pay
  nothing; a probed one reports its start and its return or unwind.
- before: the profile hook (sys.setprofile, threading.setprofile), which every Python
  call passes through.
A generator's or coroutine's time runs from each resumption to each suspension.
Nothing of the program's changes; any failure here turns the hook off, never the program.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import ctypes
import fnmatch
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

_PROBES_ENV, _LAYER_ENV = "ADAPTYST_PY_PROBES", "ADAPTYST_PY_LAYER"
_BATCH = 64
_FLUSH_NS = 100_000_000
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


class _Hook:
    def __init__(self, probes: list[tuple[str, str]], layer: str) -> None:
        self.probes = probes
        self.lib = ctypes.CDLL(layer)
        self.lib.adaptyst_py_timed.argtypes = [
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_uint64,
        ]
        self.lib.adaptyst_py_probed.restype = ctypes.c_int
        self.lock = threading.Lock()
        self.pending: list[tuple[bytes, int]] = []  # (key, ns), appended without a lock
        self.flushed = [time.perf_counter_ns()]
        self.keys: dict[CodeType, bytes | None] = {}  # code -> its key; None: not probed
        self.local = threading.local()

    def key_of(self, code: CodeType) -> bytes | None:
        if code in self.keys:
            return self.keys[code]
        key = None
        name = _qualname(code)
        # A script run by a relative path keeps it (3.8): from the folder it ran in.
        where = code.co_filename
        if not where.startswith("<") and not os.path.isabs(where):
            where = os.path.abspath(where)
        for path, func in self.probes:
            if fnmatch.fnmatchcase(where, path) and fnmatch.fnmatchcase(name, func):
                key = _key(name)
                break
        self.keys[code] = key
        return key

    def timers(self) -> tuple[Callable[[], None], Callable[[bytes], None]]:
        """(started, ended): the per-call work, its names bound once (a call of the probed
        function pays for these two alone, and a hand-over every BATCH calls)."""
        now, tls, pending, flushed = time.perf_counter_ns, self.local, self.pending, self.flushed
        flush, add = self.flush, self.pending.append

        def started() -> None:
            try:
                tls.stack.append(now())
            except AttributeError:
                tls.stack = [now()]

        def ended(key: bytes) -> None:
            t = now()
            try:
                begun = tls.stack.pop()
            except (AttributeError, IndexError):
                return
            add((key, t - begun))  # one append: atomic under the GIL
            if len(pending) >= _BATCH or t - flushed[0] >= _FLUSH_NS:
                flush()

        return started, ended

    def flush(self) -> None:
        """The calls so far, handed over (one thread at a time; calls appended meanwhile
        stay for the next)."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            self.flushed[0] = time.perf_counter_ns()
            taken = self.pending[: len(self.pending)]
            del self.pending[: len(taken)]
        finally:
            self.lock.release()
        n = len(taken)
        if n and self.lib.adaptyst_py_probed():  # no probe holds the site: nothing to hand
            self.lib.adaptyst_py_timed(
                (ctypes.c_char_p * n)(*(k for k, _ in taken)),
                (ctypes.c_uint64 * n)(*(t for _, t in taken)),
                n,
            )


def _monitoring(hook: _Hook) -> None:
    mon: Any = getattr(sys, "monitoring")  # noqa: B009 (3.12 and later only)
    # From the last id down: 0 is the debugger's, 2 the profiler's (pdb, debugpy, cProfile).
    tool = next(i for i in range(5, -1, -1) if mon.get_tool(i) is None)
    mon.use_tool_id(tool, "adaptyst-top")
    ev = mon.events
    ends = ev.PY_RETURN | ev.PY_YIELD

    keys, disable = hook.keys, mon.DISABLE
    started, ended = hook.timers()

    def start(code: CodeType, offset: int) -> Any:
        if code not in keys:
            if hook.key_of(code) is None:
                return disable  # never looked at again
            mon.set_local_events(tool, code, ends | ev.PY_RESUME)
        elif keys[code] is None:
            return disable
        started()
        return None

    def end(code: CodeType, offset: int, value: object) -> None:
        key = keys.get(code)
        if key is not None:
            ended(key)

    def unwind(code: CodeType, offset: int, exc: BaseException) -> None:
        key = keys.get(code)
        if key is not None:
            ended(key)

    mon.register_callback(tool, ev.PY_START, start)
    mon.register_callback(tool, ev.PY_RESUME, start)
    mon.register_callback(tool, ev.PY_RETURN, end)
    mon.register_callback(tool, ev.PY_YIELD, end)
    mon.register_callback(tool, ev.PY_UNWIND, unwind)
    mon.set_events(tool, ev.PY_START | ev.PY_UNWIND)


def _profile(hook: _Hook) -> None:
    keys, key_of = hook.keys, hook.key_of
    started, ended = hook.timers()

    def profiler(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            code = frame.f_code
            key = keys[code] if code in keys else key_of(code)
            if key is not None:
                started()
        elif event == "return":
            key = keys.get(frame.f_code)
            if key is not None:
                ended(key)

    threading.setprofile(profiler)
    sys.setprofile(profiler)


def _install() -> None:
    text = os.environ.get(_PROBES_ENV, "")
    layer = os.environ.get(_LAYER_ENV, "")
    probes = [
        (line.split("\t", 1)[0], line.split("\t", 1)[1])
        for line in text.splitlines()
        if "\t" in line
    ]
    if not probes or not layer:
        return
    hook = _Hook(probes, layer)
    if hasattr(sys, "monitoring"):
        _monitoring(hook)
    else:
        _profile(hook)
    atexit.register(hook.flush)


def _chain() -> None:
    """The sitecustomize this one stands in front of (the distribution's), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.modules.pop("sitecustomize", None)
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    old, sys.path[:] = list(sys.path), path
    try:
        import sitecustomize  # noqa: F401  (the next one on the path)
    except ImportError:
        pass
    finally:
        sys.path[:] = old
        if saved is not None:
            sys.modules.setdefault("sitecustomize", saved)


try:
    _install()
except Exception as exc:  # the program runs whatever the hook could not do
    sys.stderr.write(f"adaptyst-top: python probes off: {exc}\n")
_chain()
