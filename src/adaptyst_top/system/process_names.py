"""What a user calls a process: its program, or for an interpreter the script or module
it runs (`python3 train.py` is `train.py`), from its command line."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.proc_exec import read_proc

_INTERPRETERS = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|perl|ruby|node|julia|Rscript|bash|sh)$")


def app_name(argv: Sequence[str]) -> str | None:
    """An application's name from its command line: the program's, or for an interpreter
    the script's or module's (`python3 -m pkg.app` is `pkg.app`, not every Python program)."""
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if not _INTERPRETERS.match(name):
        return name or None
    args = list(argv[1:])
    while args:
        a = args.pop(0)
        if a == "-m" and args:
            return args[0]
        if a in ("-c", "-e"):
            return name  # code on the command line: nothing better to name it by
        if not a.startswith("-"):
            return os.path.basename(a)
    return name


def process_name(pid: int) -> str | None:
    """PID's application name from /proc/PID/cmdline; None when it is gone or not ours
    to read (another user's under hidepid, a kernel thread)."""
    try:
        argv = [a.decode(errors="replace") for a in read_proc(pid, "cmdline").split(b"\0") if a]
    except OSError:
        return None
    name = app_name(argv)
    return None if name is None else inert(name)
