"""Python frames in the profile, on every CPython this node has that the tool knows
(pyenv's, the distribution's): a program whose work splits 4:1 between two methods called
from two callers, profiled from launch; its Python functions named by qualified name and
file, their shares within 5 points of what the program measured, their callers right,
and C code (zlib) beneath the Python frame that called it."""

from __future__ import annotations

import ast
import glob
import json
import re
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.profile.python.offsets import OFFSETS
from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.shares import share_bound

PROGRAM = TARGETS / "py_split.py"
HZ = 497
SECONDS = 4


def _interpreters() -> list[str]:
    found = []
    for exe in sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3.*")) + sorted(
        glob.glob("/usr/bin/python3.*")
    ):
        m = re.search(r"python3\.(\d+)$", exe)
        if m and (3, int(m.group(1))) in OFFSETS:
            found.append(exe)
    return found


INTERPRETERS = _interpreters()


def version_of(python: str) -> tuple[int, int]:
    """(3, N) of an interpreter found above, from its name."""
    m = re.search(r"python3\.(\d+)$", python)
    assert m, python
    return (3, int(m.group(1)))


def _defined() -> dict[str, int]:
    """Each function's qualified name and the line of its `def`, from the program's source."""
    out = {}
    for node in ast.parse(PROGRAM.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            out.update(
                {
                    f"{node.name}.{f.name}": f.lineno
                    for f in node.body
                    if isinstance(f, ast.FunctionDef)
                }
            )
    return out


DEFINED = _defined()


def test_the_node_has_a_known_python() -> None:
    assert INTERPRETERS, "no CPython 3.8+ found (/usr/bin/python3.11 is Debian's)"


# Serial: under heavy preemption each switch-out's stack copy and frame walk is charged
# to the program's own CPU clock at the preemption's point (two busy loops beside it put
# Model.small's thread_time 1.6x above its work), so the truth it prints bends; alone,
# the shares agree within 1 point.
@pytest.mark.serial
@pytest.mark.ebpf
@requires_root
@pytest.mark.parametrize("python", INTERPRETERS)
def test_python_functions_named_with_their_shares_and_callers(python: str, tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    args = [*CLI, "record", "--profile-hz", str(HZ), "--interval", "1", "--out", str(rec)]
    proc = subprocess.run(
        [*args, "--", python, str(PROGRAM), str(SECONDS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    profile = json.loads(rec.read_text().splitlines()[-1])["profile"]
    rows = {f["name"]: f for f in profile["functions"]}
    for name in ("Model.big", "Model.small", "caller_a", "spin"):
        line = DEFINED[name]
        assert rows[name]["module"] == str(PROGRAM), rows[name]
        assert rows[name]["named_by"] == "python" and rows[name]["line"] == line, rows[name]
    spun = truth["big"] + truth["small"] + truth["packer"]
    in_main = rows["main"]["total"]
    assert in_main >= 0.5 * HZ * spun
    for name, key in (("Model.big", "big"), ("Model.small", "small"), ("packer", "packer")):
        share = rows[name]["total"] / in_main
        bound = share_bound(truth[key] / spun, in_main)
        assert abs(share - truth[key] / spun) <= bound, (name, share, truth)

    # Callers, from the folded stacks: under Model.big is caller_a, under it main.
    folded = subprocess.run(
        [*CLI, "export", str(rec), "--folded"], capture_output=True, text=True, check=True
    ).stdout
    with_big = right = 0
    beneath_packer = 0
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        # Its Python frames alone: the interpreter's own lie between them before 3.11.
        python = [f for f in frames if f in DEFINED]
        if "Model.big" in python:
            with_big += int(count)
            at = python.index("Model.big")
            right += int(count) * (python[at - 2 : at] == ["main", "caller_a"])
        if "packer" in frames and frames[-1] != "packer":
            beneath_packer += int(count)
    assert with_big and right >= 0.9 * with_big, (right, with_big)
    assert beneath_packer > 0  # zlib's C code, beneath the Python frame that called it
    assert none_left()


@pytest.mark.serial  # as above
@pytest.mark.ebpf
@requires_root
def test_a_running_python_by_pid(tmp_path: Path) -> None:
    """--pid: an interpreter already running when the profile starts (the distribution's)."""
    target = subprocess.Popen(
        ["/usr/bin/python3", str(PROGRAM), str(SECONDS + 3)], stdout=subprocess.PIPE, text=True
    )
    rec = tmp_path / "rec.jsonl"
    try:
        proc = subprocess.run(
            [
                *CLI,
                "record",
                "--pid",
                str(target.pid),
                "--profile-hz",
                str(HZ),
                "--duration",
                str(SECONDS),
                "--interval",
                "1",
                "--out",
                str(rec),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        out, _ = target.communicate(timeout=60)
    finally:
        target.kill()
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(out.strip().splitlines()[-1])
    rows = {
        f["name"]: f for f in json.loads(rec.read_text().splitlines()[-1])["profile"]["functions"]
    }
    spun = truth["big"] + truth["small"] + truth["packer"]
    share = rows["Model.big"]["total"] / rows["main"]["total"]
    bound = share_bound(truth["big"] / spun, rows["main"]["total"])
    assert abs(share - truth["big"] / spun) <= bound, (share, truth, rows["main"]["total"])
    assert rows["Model.big"]["module"] == str(PROGRAM)
    assert none_left()
