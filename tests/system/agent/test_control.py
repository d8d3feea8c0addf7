"""The control channel over real Unix sockets: assignments, peer credentials, malformed
streams, and an application outliving its monitor."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from adaptyst_top.placement.control import ControlClient, ControlServer
from adaptyst_top.placement.protocol import decode, encode
from tests.support.as_user import become
from tests.support.marks import IS_ROOT
from tests.support.waits import wait_until


def _serve_as(uid: int, path: Path, ready: int) -> None:
    """A child process: a monitor running as another user, pushing to whoever connects.
    Never returns into pytest: whatever happens, the child exits here."""
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        os.mkdir(path.parent, 0o755)  # its own, reachable by the other user's application
        server = ControlServer(path)
        os.write(ready, b"x")
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            server.push("t", "evil")
            time.sleep(0.05)
        server.close()
    except BaseException as exc:
        os.write(ready, f"!{exc}".encode()[:200])
    finally:
        os._exit(0)


@pytest.fixture
def shared_dir():  # type: ignore[no-untyped-def]
    """A directory every user can reach (pytest's own tmp_path is root-only)."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="adaptyst-ctl-", dir="/tmp"))
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _started(r: int) -> None:
    msg = os.read(r, 200)
    assert msg == b"x", msg.decode(errors="replace")


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_assignments_from_another_user_are_refused(shared_dir: Path) -> None:
    path = shared_dir / "ctl" / "control.sock"  # the monitor's own folder, made as its user
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _serve_as(65534, path, w)
    _started(r)
    got: list[str] = []
    client = ControlClient(["t"], lambda t, d, rr: got.append(d), path, retry_s=0.1)
    try:
        assert wait_until(lambda: bool(client.rejected))
        time.sleep(0.5)
        assert got == []  # root's application takes nothing from uid 65534
        assert "65534" in client.rejected[0]
    finally:
        client.close()
        os.kill(pid, 9)
        os.waitpid(pid, 0)


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_a_non_root_monitor_refuses_other_users(shared_dir: Path) -> None:
    path = shared_dir / "ctl" / "control.sock"  # the monitor's own folder, made as its user
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the monitor, as uid 65534
        _serve_as(65534, path, w)
    _started(r)
    cpid = os.fork()
    if cpid == 0:  # an application of uid 65533
        code = 2
        try:
            os.setresgid(65533, 65533, 65533)
            os.setresuid(65533, 65533, 65533)
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(path))
            s.settimeout(2)
            try:
                # The monitor may close on it before the hello is even written (EPIPE).
                s.sendall(encode("hello", pid=os.getpid(), tasks=["t"]))
                data = s.recv(100)
            except OSError:
                data = b""
            code = 0 if data == b"" else 1  # closed on it, nothing sent
        finally:
            os._exit(code)
    _, status = os.waitpid(cpid, 0)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _app_as(uid: int, path: Path, tasks: list[str], out: int) -> int:
    """A forked application of UID that says hello naming TASKS and writes what it was
    sent in 4 s to OUT."""
    pid = os.fork()
    if pid == 0:
        try:
            become(uid)
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(path))
            s.sendall(encode("hello", pid=os.getpid(), tasks=tasks))
            s.settimeout(0.2)
            got = b""
            deadline = time.monotonic() + 4.0  # room for the others' forks on a busy node
            while time.monotonic() < deadline:
                try:
                    got += s.recv(4096)
                except TimeoutError:
                    continue
            os.write(out, got or b"-")
        finally:
            os._exit(0)
    return pid


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_roots_monitor_sends_a_task_only_to_its_owners_applications(shared_dir: Path) -> None:
    """Root's advisor serves every user: an application that names no task (it would
    take any) gets none of another's, and a task two users named goes to neither."""
    (shared_dir / "ctl").mkdir(mode=0o755)
    server = ControlServer(shared_dir / "ctl" / "control.sock")
    pipes = [os.pipe() for _ in range(4)]
    apps = [
        (65533, []),  # names nothing
        (65532, ["mine"]),  # names its own task alone
        (65531, ["both"]),
        (65530, ["both"]),  # the same name from two users: no owner
    ]
    try:
        pids = [_app_as(u, server.path, t, w) for (u, t), (_r, w) in zip(apps, pipes, strict=True)]
        assert wait_until(lambda: sum(c.registered for c in server.clients) == 4)
        for task in ("mine", "both", "other"):
            server.push(task, "opencl", "why")
        got = [os.read(r, 4096) for r, _w in pipes]
        for p in pids:
            os.waitpid(p, 0)
    finally:
        server.close()
    assert got[0] == b"-" and got[2] == b"-" and got[3] == b"-", got
    assert decode(got[1].splitlines()[0]).fields["task"] == "mine"
    assert b"both" not in got[1] and b"other" not in got[1]
