"""The python kind on the seam: its specs, what a launched command gets in its
environment (the hook first on PYTHONPATH, every probe's globs), and the hook itself run
by this interpreter against the real layer: the program's output unchanged, a layer
that cannot load one line on stderr and the program runs on."""

from __future__ import annotations

import os
import subprocess
import sys
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
