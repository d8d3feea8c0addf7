"""adaptyst-top's Python hook, run by every CPython the monitor launches with it (this
folder first on PYTHONPATH): it sets up the timing of `python:` probes
(adaptyst_py_hook.py, imported only when a probe needs it), then runs the sitecustomize
it stands in front of, if there is one.

ADAPTYST_PY_PROBES: the probes from the start, one a line, "FILE<TAB>FUNC";
ADAPTYST_PY_LAYER: the Python layer's path; ADAPTYST_PY_CONTROL: "FD:DEV:INODE", a
pipe's read end on which the monitor sends the whole set again, NUL-ended, each time
a probe is added or removed (a thread of the hook's own waits on it, blocked in read:
it costs nothing until then). It is taken only where FD is that very pipe (a program's
child gets the variable, not the descriptor), moved to a high descriptor, closed on the
program's exec and in a forked child. A program run with -I, -E or -S never runs the
hook (no PYTHONPATH, no site): a later set finds nobody. Before
3.12 a hook set later would reach this thread only: there the pipe serves only a hook
installed from the start. Any failure turns the hook off, never the program.
"""

from __future__ import annotations

import os
import stat
import sys

MYPY = False  # typing is not imported into every program the hook runs in
if MYPY:
    from typing import Any

_PROBES_ENV, _LAYER_ENV, _CONTROL_ENV = (
    "ADAPTYST_PY_PROBES",
    "ADAPTYST_PY_LAYER",
    "ADAPTYST_PY_CONTROL",
)
_MESSAGE_MAX = 1 << 16  # a set of probes, as the monitor bounds it
_HIGH_FD = 512


def _probes(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        path, tab, func = line.partition("\t")
        if tab:
            out.append((path, func))
    return out


def _control() -> int | None:
    """The control pipe's descriptor, made close-on-exec; None where there is none, or
    the descriptor the variable names is not that pipe."""
    try:
        fd, dev, ino = (int(x) for x in os.environ.get(_CONTROL_ENV, "").split(":"))
        st = os.fstat(fd)
    except (ValueError, OSError):
        return None
    if not stat.S_ISFIFO(st.st_mode) or (st.st_dev, st.st_ino) != (dev, ino):
        return None
    # Moved high, close-on-exec: a program that closes its low descriptors and opens
    # others never has one of its files where the hook reads.
    import fcntl

    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD)
    except OSError:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return high


def _say(what: str, exc: BaseException) -> None:
    sys.stderr.write(f"adaptyst-top: python probes {what}: {exc}\n")


def _watch(fd: int, ident: tuple[int, int], layer: str, hook: Any) -> None:
    """Take each new set of probes from the monitor until it closes the pipe (it went
    away, and its probes with it: nothing is timed from then); the timing module is
    imported with the first (a program that is never probed pays for none of it)."""
    held = b""
    while True:
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != ident:
                return  # the program closed it and has another file there: never read that
            data = os.read(fd, 4096)
        except OSError:
            return
        held += data
        if not data or len(held) > _MESSAGE_MAX:
            if hook is not None:
                hook.update([])
            return
        while b"\0" in held:
            message, _, held = held.partition(b"\0")
            probes = _probes(message.decode("utf-8", "replace"))
            try:
                if hook is None:
                    import adaptyst_py_hook

                    hook = adaptyst_py_hook.install(probes, layer)
                else:
                    hook.update(probes)
            except Exception as exc:
                _say("off", exc)
                return


def _start() -> None:
    probes = _probes(os.environ.get(_PROBES_ENV, ""))
    layer = os.environ.get(_LAYER_ENV, "")
    control = _control()
    if not layer or not (probes or control is not None):
        return
    if not probes and not hasattr(sys, "monitoring"):
        if control is not None:
            os.close(control)  # before 3.12 a hook set later would time this thread alone
        return
    hook = None
    if probes:
        import adaptyst_py_hook

        hook = adaptyst_py_hook.install(probes, layer)
    if control is not None:
        # Imported here, by the main thread: threading takes the thread that imports it
        # first for the main one, and waits for it at exit.
        import _thread
        import threading  # noqa: F401

        st = os.fstat(control)
        ident = (st.st_dev, st.st_ino)
        _thread.start_new_thread(_watch, (control, ident, layer, hook))
        # A forked child has no watcher: the monitor's later sets are the parent's.
        os.register_at_fork(after_in_child=lambda: os.close(control))


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
    _start()
except Exception as exc:  # the program runs whatever the hook could not do
    _say("off", exc)
_chain()
