"""The pipe `python:` probes added later go on (runtime/python_control.py), with the
real hook in real interpreters: which commands get it, whole sets in one write, a
command that is gone or not reading said in one line, a Python before 3.12 without a
probe from its start refused, and a descriptor the variable names that is not that
very pipe never read (a program's child gets the variable, not the pipe)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.runtime.python_control import (
    MESSAGE_MAX,
    PythonControl,
    PythonControlError,
    is_python_program,
)


@pytest.mark.parametrize(
    ("head", "python"),
    [
        ("#!/usr/bin/python3 -u\n", True),
        ("#!/usr/bin/env python3\n", True),
        ("#!/usr/bin/env -S python3.12 -X dev\n", True),
        ("#!/bin/sh\nexec python3 x.py\n", False),
        ("print('no #! line')\n", False),
    ],
)
def test_a_script_is_python_by_its_first_line(tmp_path: Path, head: str, python: bool) -> None:
    script = tmp_path / "prog"
    script.write_text(head)
    assert is_python_program(str(script)) is python


def test_an_interpreter_is_python_by_its_name() -> None:
    assert is_python_program(os.path.realpath(sys.executable))
    assert not is_python_program("/bin/true")


def _spec(func: str) -> ProbeSpec:
    return parse_spec(f"python:/srv/app.py:{func}")


def test_each_change_sends_the_whole_set_in_one_message() -> None:
    control = PythonControl([])
    try:
        control.add(_spec("a"))
        control.add(_spec("b*"))
        control.remove(_spec("a"))
        got = os.read(control.pass_fd, 4096)
    finally:
        control.close()
    assert got.split(b"\0") == [
        b"/srv/app.py\ta",
        b"/srv/app.py\ta\n/srv/app.py\tb*",
        b"/srv/app.py\tb*",
        b"",
    ]


def test_a_set_past_one_write_is_refused_and_the_last_kept() -> None:
    control = PythonControl([])
    try:
        control.add(_spec("a"))
        with pytest.raises(PythonControlError, match=f"at most {MESSAGE_MAX} bytes"):
            control.add(parse_spec(f"python:/{'d' * (MESSAGE_MAX - 8)}.py:f"))
        assert list(control.probes) == ["/srv/app.py\ta"]
    finally:
        control.close()


def test_a_command_gone_is_said_in_one_line() -> None:
    control = PythonControl([_spec("a")])
    control.launched(os.getpid())  # its end of the pipe closed: nobody reads it
    try:
        with pytest.raises(PythonControlError, match="hook is gone") as err:
            control.add(_spec("b"))
        assert "\n" not in str(err.value) and list(control.probes) == ["/srv/app.py\ta"]
    finally:
        control.close()


def test_a_command_not_reading_is_said_not_waited_on() -> None:
    control = PythonControl([])
    try:
        with pytest.raises(PythonControlError, match="not taking new probes"):
            for i in range(10_000):  # fills the pipe: nobody reads
                control.add(_spec(f"f{i}"))
    finally:
        control.close()


def _pythons() -> list[str]:
    """This node's CPythons: Debian's, pyenv's."""
    found = [*map(str, sorted(Path("/root/.pyenv/versions").glob("3.*/bin/python3.*")))]
    found += [p for p in ("/usr/bin/python3.11", "/usr/bin/python3.12") if os.path.exists(p)]
    return [p for p in found if re.search(r"python3\.\d+$", p) and os.access(p, os.X_OK)]


def _version(python: str) -> tuple[int, int]:
    return (3, int(python.rsplit(".", 1)[1]))


def _python_before_312() -> str | None:
    return next((p for p in _pythons() if (3, 8) <= _version(p) < (3, 12)), None)


def test_before_312_without_a_probe_from_the_start_is_refused(tmp_path: Path) -> None:
    python = _python_before_312()
    assert python, "no CPython before 3.12 here (Debian's is 3.11)"
    control = PythonControl([])
    proc = subprocess.Popen([python, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)  # it maps itself
        control.launched(proc.pid)
        with pytest.raises(PythonControlError, match="only from its start") as err:
            control.add(_spec("a"))
        assert "\n" not in str(err.value)
    finally:
        proc.kill()
        proc.wait()
        control.close()


def test_a_descriptor_that_is_not_the_pipe_is_never_read(tmp_path: Path) -> None:
    """The variable names FD, but FD is another pipe (the program's own): the hook
    leaves it alone, and the program reads all that was written on it."""
    control = PythonControl([])
    theirs_r, theirs_w = os.pipe()
    os.write(theirs_w, b"/srv/app.py\tf\0the program's own bytes")
    os.close(theirs_w)
    env = {**os.environ, **control.env(dict(os.environ))}
    _, dev, ino = env["ADAPTYST_PY_CONTROL"].split(":")
    env["ADAPTYST_PY_CONTROL"] = f"{theirs_r}:{dev}:{ino}"
    program = f"import os, time; time.sleep(0.5); print(os.read({theirs_r}, 4096))"
    # One that would take later probes, where the node has one (3.12+).
    python = next((p for p in _pythons() if _version(p) >= (3, 12)), sys.executable)
    try:
        out = subprocess.run(
            [python, "-c", program],
            env=env,
            pass_fds=(theirs_r,),
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(theirs_r)
        control.close()
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.strip() == repr(b"/srv/app.py\tf\0the program's own bytes")


def test_two_probes_alike_keep_their_line_until_the_last_goes() -> None:
    control = PythonControl([])
    try:
        control.add(_spec("a"))
        control.add(_spec("a"))  # a second spec of the same text: one line, two users
        control.remove(_spec("a"))
        assert list(control.probes) == ["/srv/app.py\ta"]
        control.remove(_spec("a"))
        assert list(control.probes) == []
    finally:
        control.close()


def test_a_fifo_as_the_command_is_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "cmd"
    os.mkfifo(fifo, 0o755)
    started = time.monotonic()
    assert not is_python_program(str(fifo))
    assert time.monotonic() - started < 1.0
