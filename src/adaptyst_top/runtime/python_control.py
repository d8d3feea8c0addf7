"""`python:` probes added while a launched Python runs: the command starts with the
tool's hook and the read end of a pipe (kinds/python_hook/sitecustomize.py); each time a
`python:` probe is added or removed the monitor writes the whole set on it, and the
hook times those functions from then on. From CPython 3.12 (sys.monitoring reaches every
thread from one); before, only where the command started with a `python:` probe (the
profile hook is then on from the start: kinds/python.py says what it costs).

Only a command that is a Python program gets it (an interpreter, or a script whose
`#!` line names one): any other keeps its environment and descriptors as they were."""

from __future__ import annotations

import contextlib
import os
import re
import select
import stat
from collections import Counter

from adaptyst_top.collectors.probes.kinds.python import hook_env, probe_line
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.collectors.profile.python.detect import python_version

MESSAGE_MAX = select.PIPE_BUF  # one write, never interleaved: the hook reads whole sets
LIVE_FROM = (3, 12)
_PYTHON = re.compile(rb"(?:^|/)python[0-9.]*$")
_HEAD = 256


class PythonControlError(RuntimeError):
    """Why a set of probes cannot reach the command, in one line."""


def is_python_program(path: str) -> bool:
    """Whether PATH (the command, resolved) is a CPython, or a script it runs."""
    if _PYTHON.search(os.fsencode(path)):
        return True
    try:
        # Non-blocking and a regular file only: a FIFO's open or read would wait.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        head = os.read(fd, _HEAD) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return False
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return False
    words = head[2:].split(b"\n", 1)[0].split()
    # `#!/usr/bin/python3 -u`, `#!/usr/bin/env python3`, `#!/usr/bin/env -S python3 -X dev`
    return any(_PYTHON.search(w) for w in words[:3])


class PythonControl:
    """The monitor's end of one launched command's pipe and the set last sent on it."""

    def __init__(self, specs: list[ProbeSpec]) -> None:
        self._read, self._write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._write, False)  # a full pipe is said, never waited on
        st = os.fstat(self._read)
        self.ident = f"{self._read}:{st.st_dev}:{st.st_ino}"
        self.from_start = [probe_line(s) for s in specs if s.kind == "python"]
        self.probes: dict[str, None] = dict.fromkeys(self.from_start)
        # Probes per line: two specs alike are two probes; the line goes with the last.
        self.users: Counter[str] = Counter(self.from_start)
        self.pid: int | None = None

    @property
    def pass_fd(self) -> int:
        return self._read

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """The variables that give the command the hook and this pipe (over ENV)."""
        return hook_env(env, list(self.from_start), self.ident)

    def launched(self, pid: int) -> None:
        """The command has its end: the monitor keeps only its own."""
        self.pid = pid
        with contextlib.suppress(OSError):
            os.close(self._read)

    def add(self, spec: ProbeSpec) -> None:
        """Time SPEC's calls too; PythonControlError when the command cannot take it."""
        if self.pid is not None and not self.from_start:
            found = python_version(self.pid)
            if found is not None and found < LIVE_FROM:
                version = ".".join(map(str, found))
                raise PythonControlError(
                    f"{spec.text}: Python {version} takes python: probes only from its start "
                    "(before 3.12 a later hook would time one thread): launch it with "
                    f"--probe '{spec.text}'"
                )
        line = probe_line(spec)
        if line not in self.probes:
            self._send({**self.probes, line: None})
        self.users[line] += 1

    def remove(self, spec: ProbeSpec) -> None:
        line = probe_line(spec)
        if self.users[line] > 1:
            self.users[line] -= 1
            return
        if line in self.probes:
            self._send({k: None for k in self.probes if k != line})
        self.users.pop(line, None)

    def _send(self, probes: dict[str, None]) -> None:
        message = "\n".join(probes).encode() + b"\0"
        if len(message) > MESSAGE_MAX:
            raise PythonControlError(
                f"python: probes: at most {MESSAGE_MAX} bytes of FILE and FUNC in all"
            )
        try:
            os.write(self._write, message)
        except BlockingIOError:
            raise PythonControlError(
                "python: probes: the command is not taking new probes (its hook is not reading)"
            ) from None
        except BrokenPipeError:
            raise PythonControlError(
                "python: probes: the command's Python hook is gone (it exited, or is not "
                "Python 3.12+ and had no python: probe from its start)"
            ) from None
        self.probes = probes

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
