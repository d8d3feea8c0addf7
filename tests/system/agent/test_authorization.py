"""The agent's rule for who may probe a process, on processes whose leader is gone: a
live process whose leader thread exited is its user's (its /proc/PID files read as
root's all the same), a zombie is said to have exited, not to be "not dumpable"."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.agent.core.authorization import Peer, may_probe
from tests.support.as_user import become
from tests.support.marks import requires_root
from tests.support.paths import TARGETS

pytestmark = [requires_root]
NOBODY = 65534
CLONE_NEWUSER = 0x10000000


@pytest.fixture
def built() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="adt-leader-"))
    folder.chmod(0o755)
    source = TARGETS / "leader_exits.c"
    subprocess.run(
        ["gcc", "-O2", "-pthread", "-o", str(folder / "leader"), str(source)], check=True
    )
    try:
        yield folder / "leader"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _nobody() -> Peer:
    return Peer(pid=1, uid=NOBODY, gid=NOBODY, groups=frozenset({NOBODY}), privileged=False)


def test_a_process_whose_leader_exited_is_still_its_users(built: Path) -> None:
    proc = subprocess.Popen(
        [str(built)], user=NOBODY, group=NOBODY, extra_groups=[], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while "Z" not in Path(f"/proc/{proc.pid}/status").read_text().split("State:")[1][:4]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert os.stat(f"/proc/{proc.pid}/status").st_uid == 0  # what misled the rule
        assert may_probe(_nobody(), proc.pid) is None
    finally:
        proc.kill()
        proc.wait()


def test_a_zombie_is_said_to_have_exited() -> None:
    proc = subprocess.Popen(["true"], user=NOBODY, group=NOBODY, extra_groups=[])
    deadline = time.monotonic() + 10
    while "zombie" not in Path(f"/proc/{proc.pid}/status").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        # As a gone process is: the guard leaves a session's last read alone for it.
        assert may_probe(_nobody(), proc.pid) == (
            f"PID {proc.pid}: no such process (a zombie: it has exited)"
        )
    finally:
        proc.wait()


def test_a_process_in_a_user_namespace_is_refused_in_one_line() -> None:
    """Rootless podman's processes: root of their own user namespace, so the in-kernel
    check (no permitted capability) dropped every call and the user saw 0 with no word."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            become(NOBODY)
            code = ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER)
            os.write(w, b"in" if code == 0 else b"no")
            time.sleep(30)
        finally:
            os._exit(0)
    try:
        if os.read(r, 2) != b"in":  # this kernel lets no user make one: nothing to refuse
            pytest.skip("unprivileged user namespaces are off here: no rootless container")
        why = may_probe(_nobody(), pid)
        assert why is not None and "runs in a user namespace of its own" in why, why
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
