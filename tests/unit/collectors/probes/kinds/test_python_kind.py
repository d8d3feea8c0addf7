"""The python kind on the seam: its specs, what a launched command gets in its
environment (the hook first on PYTHONPATH, every probe's globs), and the hook itself run
by this interpreter against the real layer: the program's output unchanged, a layer
that cannot load one line on stderr and the program runs on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.kinds import kind_of, parse_spec
from adaptyst_top.collectors.probes.kinds.python import (
    HOOK_DIR,
    LAYER_ENV,
    PATH_ENV,
    PROBES_ENV,
    Python,
)
from adaptyst_top.collectors.probes.spec import ProbeSpecError
from adaptyst_top.runtime.python_control import PythonControl
from tests.support.spin import without_coverage


def test_a_spec_names_a_file_glob_and_a_qualified_name_glob() -> None:
    spec = parse_spec("python:/srv/app/*.py:Model.*")
    assert (spec.kind, spec.file, spec.func, spec.label) == (
        "python",
        "/srv/app/*.py",
        "Model.*",
        "Model.*",
    )
    assert spec.target == Python.library()
    assert parse_spec("python:solver.py:run").file == os.path.abspath("solver.py")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("python:f.py", "python:FILE:FUNC"),
        ("python::run", "python:FILE:FUNC"),
        ("python:f.py:a b", "bad function glob"),
        ("python:f.py:x;rm", "bad function glob"),
    ],
)
def test_a_malformed_spec_is_one_line(text: str, says: str) -> None:
    with pytest.raises(ProbeSpecError, match=says) as err:
        parse_spec(text)
    assert "\n" not in err.value.one_line


def test_a_launched_command_gets_the_hook_first_and_every_probe() -> None:
    a, b = parse_spec("python:/a.py:f"), parse_spec("python:/b.py:g*")
    kind = kind_of(a)
    env = kind.launch_env({PATH_ENV: "/mine"}, 1.0, a)
    assert env[PATH_ENV] == f"{HOOK_DIR}:/mine" and env[LAYER_ENV] == Python.library()
    both = kind.launch_env({**env}, 1.0, b)
    assert both[PROBES_ENV] == "/a.py\tf\n/b.py\tg*"
    assert both[PATH_ENV].split(":").count(HOOK_DIR) == 1


def test_the_hook_changes_nothing_the_program_computes(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(
        "class K:\n    def hot(self, i):\n        return i * 2\n"
        "def cold(i):\n    return i + 1\n"
        "total = sum(K().hot(i) + cold(i) for i in range(1000))\n"
        "print(total)\n"
    )
    env = {
        **os.environ,
        PATH_ENV: HOOK_DIR,
        LAYER_ENV: str(Python.library()),
        PROBES_ENV: f"{program}\tK.hot",
    }
    plain = subprocess.run([sys.executable, str(program)], capture_output=True, text=True)
    hooked = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env)
    assert hooked.returncode == 0 and hooked.stderr == "", hooked.stderr
    assert hooked.stdout == plain.stdout  # what the program computes is unchanged
    bad = subprocess.run(
        [sys.executable, "-c", "print(1)"],
        capture_output=True,
        text=True,
        env={**env, LAYER_ENV: str(tmp_path / "missing.so")},
    )
    assert bad.stdout == "1\n" and "python probes off" in bad.stderr  # one line, runs on


def _pythons() -> list[str]:
    """Debian's interpreter (the profile hook) and a 3.12+ one where the node has it
    (sys.monitoring)."""
    found = [sys.executable]
    later = sorted(Path("/root/.pyenv/versions").glob("3.1[2-9]*/bin/python3.1[2-9]"))
    return found + [str(p) for p in later[-1:]]


@pytest.mark.parametrize("python", _pythons())
def test_the_hook_never_raises_into_the_program(python: str, tmp_path: Path) -> None:
    """Code compiled with a relative file name, run after its folder is gone (the hook
    cannot make the path absolute), with every function probed."""
    program = tmp_path / "prog.py"
    program.write_text(
        "import os, tempfile\n"
        "gone = tempfile.mkdtemp()\n"
        "os.chdir(gone)\n"
        "code = compile('def f():\\n    return 42\\n', 'rel.py', 'exec')\n"
        "os.rmdir(gone)\n"
        "ns = {}\n"
        "exec(code, ns)\n"
        "print(ns['f']())\n"
    )
    env = {
        **without_coverage(os.environ),  # its exit in a gone folder fails coverage's save
        PATH_ENV: HOOK_DIR,
        LAYER_ENV: str(Python.library()),
        PROBES_ENV: "*\t*",
    }
    out = subprocess.run([python, str(program)], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout, out.stderr) == (0, "42\n", "")


def test_a_later_set_leaves_the_program_s_own_monitoring_as_it_was(tmp_path: Path) -> None:
    """A program's own sys.monitoring tool sets each function aside after its first
    call (DISABLE); a new set of probes from the monitor must not bring them back."""
    later = _pythons()[1:]
    if not later:
        pytest.skip("no CPython 3.12+ on this node")  # only the profile hook before 3.12
    program = tmp_path / "own_tool.py"
    go = tmp_path / "go"
    program.write_text(
        "import os, sys, time\n"
        "mon = sys.monitoring\n"
        "mon.use_tool_id(1, 'mine')\n"
        "seen = []\n"
        "def first(code, offset):\n"
        "    seen.append(code.co_name)\n"
        "    return mon.DISABLE\n"
        "mon.register_callback(1, mon.events.PY_START, first)\n"
        "mon.set_events(1, mon.events.PY_START)\n"
        "def f():\n    return 1\n"
        "f(); f()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n"
        "f(); f()\n"
        "print(seen.count('f'))\n"
    )
    control = PythonControl([])
    env = {**os.environ, **control.env(dict(os.environ))}
    proc = subprocess.Popen(
        [later[0], str(program)],
        env=env,
        pass_fds=(control.pass_fd,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        control.launched(proc.pid)
        control.add(parse_spec(f"python:{program}:f"))
        time.sleep(1.0)  # the hook's thread takes it
        go.touch()
        out, err = proc.communicate(timeout=30)
    finally:
        control.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (0, "1\n", "")
