"""`u` (or `a`) on a process that has ended: one line that says how to probe it next run,
not the kernel's "no such process" (a newcomer's short command was gone by the time she
pressed `u`, issue 74)."""

from __future__ import annotations

import subprocess
import types

import pytest

from adaptyst_top.runtime.sources import ActionError, LiveSource


def _session(child: object, pid: int | None) -> LiveSource:
    target = types.SimpleNamespace(job=None)
    session = types.SimpleNamespace(
        child=child, pid=pid, options=types.SimpleNamespace(target=target)
    )
    return LiveSource(session)  # type: ignore[arg-type]


def test_a_launched_command_that_ended_is_said_with_the_next_runs_spec() -> None:
    ended = types.SimpleNamespace(poll=lambda: 0)
    with pytest.raises(
        ActionError, match=r"ended; on the next run, --probe 'uprobe:/bin/true:main'"
    ):
        _session(ended, 4242).add("uprobe:/bin/true:main")


def test_a_pid_that_ended_is_said_the_same() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names nothing now
    with pytest.raises(ActionError, match=r"the process has ended"):
        _session(None, gone.pid).add("uprobe:/bin/true:main")
