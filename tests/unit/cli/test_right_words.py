"""Each odd target or input gets its true one-line reason: a kernel thread, a bare --, a
spec without a target, a process that exec'd another program, doctor without root."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.cli import CLI


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "status", "line"),
    [
        (["record", "--pid", "2"], 1, "PID 2 is a kernel thread: it runs no user code to probe"),
        (["record", "--duration", "1", "--"], 2, "nothing after --: give the command to run"),
        (
            ["record", "--probe", "uprobe"],
            1,
            "bad probe spec 'uprobe': expected uprobe:TARGET:FUNC: a target and a name",
        ),
        (["record", "--interval", "nan"], 2, "must be a finite number in 0.05..3600, not nan"),
        (["record", "--duration", "-1"], 2, "must be a finite number > 0"),
        (["record", "--max-probes", "-1"], 2, "must be 1..100000, not -1"),
        (["replay", "--speed", "inf", "x"], 2, "must be a finite number in 0.01..1000, not inf"),
    ],
)
def test_one_true_line(args: list[str], status: int, line: str) -> None:
    r = cli(*args)
    assert r.returncode == status
    assert len(r.stderr.splitlines()) == 1 and line in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
