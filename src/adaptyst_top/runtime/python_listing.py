"""What `list --pid` and the picker offer of a CPython process: the functions of the
script it runs (or the module `-m` names, from its folder), each with the `python:`
spec that times it. Read as whoever lists (the user's own processes through the agent:
the client reads them, root's core never does); the script is found as the process sees
it (its root and folder) and opened only as a regular file, never through a last link.

What a process imported besides is not known from outside it: those functions are
offered by the profile (`u` on a Python frame)."""

from __future__ import annotations

import fnmatch
import glob
import os
from typing import Any

from adaptyst_top.collectors.probes.kinds.python import FUNC
from adaptyst_top.collectors.profile.python.detect import python_version
from adaptyst_top.collectors.profile.python.names import functions_in
from adaptyst_top.runtime.listing import Candidate
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.proc_exec import read_proc

# Options of the interpreter that take the next word as their argument.
_WITH_ARGUMENT = {"-W", "-X", "--check-hash-based-pycs"}


def _argv(pid: int) -> list[str]:
    try:
        raw = read_proc(pid, "cmdline")
    except OSError:
        return []
    return [os.fsdecode(a) for a in raw.split(b"\0")[:-1]]


def script_of(argv: list[str], cwd: str, root: str = "") -> str | None:
    """The .py file the interpreter's ARGV runs, as the process names it (relative ones
    from CWD, its folder): its script, or `-m`'s module when it is a file there (under
    ROOT, the process's root as a path here); None for `-c`, standard input, or a module
    found elsewhere on its path."""
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a in _WITH_ARGUMENT:
            i += 2
            continue
        if a == "-m" or (a.startswith("-m") and len(a) > 2):
            module = argv[i + 1] if a == "-m" and i + 1 < len(argv) else a[2:]
            base = os.path.join(cwd, *module.split("."))
            for path in (base + ".py", os.path.join(base, "__main__.py")):
                if os.path.isfile(root + path):
                    return path
            return None
        if a == "-c" or (a.startswith("-c") and len(a) > 2) or a == "-":
            return None
        if not a.startswith("-"):
            break
        i += 1
    if i >= len(argv):
        return None
    return argv[i] if os.path.isabs(argv[i]) else os.path.join(cwd, argv[i])


def python_object(pid: int, pattern: str = "*") -> dict[str, Any] | None:
    """`list --pid`'s object for PID's Python functions, or None (not a CPython the tool
    knows, not this user's, or no script file to read)."""
    if os.geteuid() != 0:
        try:
            if os.stat(f"/proc/{pid}").st_uid != os.getuid():
                return None  # another's: nothing of it is listed
        except OSError:
            return None
    version = python_version(pid)
    if version is None:
        return None
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    root = f"/proc/{pid}/root"
    script = script_of(_argv(pid), cwd, root)
    if script is None or any(c in script for c in "\t\n\0"):
        return None  # a path no spec can name
    functions = functions_in(root + script)
    if functions is None:
        return None
    file = glob.escape(script)  # a spec's FILE is a glob: this path, and no other
    return {
        "path": inert(script),
        "stripped": False,
        "python": ".".join(map(str, version)),
        "python_functions": [
            {"name": inert(q), "line": line, "spec": f"python:{file}:{q}"}
            for q, line in functions
            if fnmatch.fnmatchcase(q, pattern) and FUNC.fullmatch(q)
        ],
    }


def python_candidates(pid: int) -> list[Candidate]:
    """The picker's lines for PID's Python functions (none where python_object has none)."""
    obj = python_object(pid)
    if obj is None:
        return []
    return [
        Candidate(f["spec"], f"{f['name']}  {os.path.basename(obj['path'])}:{f['line']}")
        for f in obj["python_functions"]
    ]
