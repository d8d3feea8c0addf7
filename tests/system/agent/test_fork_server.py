"""The agent's fork server (agent/core/fork_server.py), real, as root: a worker it forks
is its user's alone and holds nothing of root's; what is not a request is refused and
the server goes on; a server gone costs one exec'd worker and is started again; it ends
with the agent, whichever way the agent ends."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.agent.core import fork_server, forks, opener
from adaptyst_top.agent.core.kept_workers import end
from adaptyst_top.runtime.agent_client import AgentConnection
from tests.support.marks import requires_root
from tests.support.waits import wait_until
from tests.system.agent.test_agent import (  # noqa: F401 - fixtures
    Agent,
    AsUser,
    User,
    children_as,
    fork_server_of,
    say,
    shared,
    users,
    worker_name,
)

pytestmark = [requires_root]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[forks.ForkServer]:
    """A fork server of the test's own, in the place of the agent's."""
    s = forks.ForkServer()
    s.start()
    assert s.up
    monkeypatch.setattr(forks, "SERVER", s)
    try:
        yield s
    finally:
        s.close()
        opener.end_all()


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines())}


def _inode(link: str) -> str:
    return os.readlink(link)  # "socket:[N]"


def test_a_forked_worker_is_its_users_alone(
    server: forks.ForkServer,
    users: tuple[User, User],  # noqa: F811 - the fixture
    shared: Path,  # noqa: F811
) -> None:
    alice, bob = users
    secret = shared / f"bob-{os.getpid()}"
    secret.write_text("bob's\n")
    os.chown(secret, bob.uid, bob.gid)
    secret.chmod(0o600)
    worker = opener._KEPT.start(alice.uid, alice.gid, [alice.gid])
    try:
        assert isinstance(worker.proc, forks.Forked)
        pid = worker.proc.pid
        server_pid = server._proc.pid  # type: ignore[union-attr]
        assert wait_until(lambda: _status(pid)["Name"] == "adt-opener", 5.0)
        assert wait_until(lambda: _status(pid)["Uid"].split() == [str(alice.uid)] * 4, 5.0)
        st = _status(pid)
        assert int(st["PPid"]) == server_pid
        assert st["Gid"].split() == [str(alice.gid)] * 4
        assert st["Groups"].split() == [str(alice.gid)]
        assert int(st["CapEff"], 16) == int(st["CapPrm"], 16) == 0
        assert st["NoNewPrivs"] == "1"
        # Its socket and the standard three, nothing of the server's: not its link
        # to the agent (a user who took her worker over must not reach root's server).
        fds = sorted(int(f) for f in os.listdir(f"/proc/{pid}/fd"))
        assert fds == [0, 1, 2, 3]
        theirs = {
            _inode(f"/proc/{server_pid}/fd/{f}") for f in os.listdir(f"/proc/{server_pid}/fd")
        }
        assert _inode(f"/proc/{pid}/fd/3") not in theirs

        # Not dumpable: alice cannot read its memory, though it runs as her.
        def peek(up: int, _down: int) -> None:
            try:
                os.close(os.open(f"/proc/{pid}/mem", os.O_RDONLY))
                say(up, mem="opened")
            except OSError as exc:
                say(up, mem=exc.errno)

        c = AsUser(alice, peek)
        assert c.read() == {"mem": 13}  # EACCES
        assert c.wait() == 0
    finally:
        end(worker)
        assert worker.proc.poll() is not None
    # It opens as her: her file, and not bob's.
    got = opener.open_as(alice.uid, alice.gid, [alice.gid], [str(shared / "workload"), str(secret)])
    try:
        assert got[0] is not None and stat.S_ISREG(os.fstat(got[0]).st_mode)
        assert got[1] is None
    finally:
        for fd in got:
            if fd is not None:
                os.close(fd)
        secret.unlink()


def _raw_server() -> tuple[subprocess.Popen[bytes], socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen(
        [sys.executable, "-I", "-m", fork_server.__name__, str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
        env={},
    )
    theirs.close()
    ours.settimeout(30)
    assert ours.recv(1) == b"R"
    return proc, ours


def test_what_is_not_a_request_is_refused_and_the_server_goes_on() -> None:
    proc, link = _raw_server()
    try:
        a, b = socket.socketpair()
        link.send(b"o")  # no socket with it
        assert link.recv(16) == b""
        socket.send_fds(link, [b"x"], [b.fileno()])  # no such kind
        assert link.recv(16) == b""
        socket.send_fds(link, [b"o"], [b.fileno(), a.fileno()])  # two sockets
        assert link.recv(16) == b""
        assert proc.poll() is None
        # Then a real one: an opener, told whose it is (nobody's) as the agent does.
        socket.send_fds(link, [b"o"], [b.fileno()])
        pid_bytes, fds, _flags, _addr = socket.recv_fds(link, 16, 1)
        (pid,) = fork_server.PID.unpack(pid_bytes)
        worker = forks.Forked(pid, fds[0])
        b.close()
        a.sendall(b'{"uid": 65534, "gid": 65534, "groups": [65534]}')
        assert wait_until(lambda: _status(pid)["Uid"].split()[0] == "65534", 5.0)
        # Its socket's end closes (the agent's would): it exits, and its pidfd says so.
        a.close()
        worker.wait(5.0)
        assert worker.returncode == -1
        # The agent's end closes: the server exits.
        link.close()
        assert proc.wait(5.0) == 0
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_server_gone_or_late_costs_one_exec_and_is_started_again(
    how: str,
    server: forks.ForkServer,
    users: tuple[User, User],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alice, _ = users
    old = server._proc
    assert old is not None
    if how == "killed":
        old.kill()
        old.wait()
    else:  # it answers nothing: given up on after ANSWER_TIMEOUT_S, killed
        monkeypatch.setattr(forks, "ANSWER_TIMEOUT_S", 0.3)
        old.send_signal(signal.SIGSTOP)
    worker = opener._KEPT.start(alice.uid, alice.gid, [alice.gid])
    try:
        assert isinstance(worker.proc, subprocess.Popen)  # exec'd, as before
    finally:
        end(worker)
    assert old.poll() is not None
    assert wait_until(lambda: server.up, 30.0)
    assert server._proc is not None and server._proc.pid != old.pid
    again = opener._KEPT.start(alice.uid, alice.gid, [alice.gid])
    try:
        assert isinstance(again.proc, forks.Forked)
    finally:
        end(again)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_server_ends_with_the_agent_and_forks_her_workers(
    sig: int,
    users: tuple[User, User],  # noqa: F811 - the fixture
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users
    agent = Agent(shared / f"agent-fs-{sig}.sock")
    try:
        assert wait_until(lambda: fork_server_of(agent.proc.pid) is not None, 30.0)
        server_pid = fork_server_of(agent.proc.pid)
        ready = fork_server.READY_NAME.decode()
        assert wait_until(
            lambda: Path(f"/proc/{server_pid}/comm").read_text().strip() == ready, 30.0
        )

        def hello(up: int, down: int) -> None:
            conn = AgentConnection(str(agent.path))
            say(up, connected=True)
            os.read(down, 1)
            conn.close()

        c = AsUser(alice, hello)
        try:
            assert c.read() == {"connected": True}
            mine = lambda: {  # noqa: E731
                worker_name(p): int(_status(p)["PPid"])
                for p in children_as(agent.proc.pid, alice.uid)
            }
            assert wait_until(lambda: {"opener", "parser"} <= set(mine()), 5.0)
            assert mine()["opener"] == mine()["parser"] == server_pid
            os.write(c.down, b"x")
            assert c.wait() == 0
        except BaseException:
            c.kill()
            raise
        agent.stop(sig)
        assert wait_until(lambda: not Path(f"/proc/{server_pid}").exists(), 5.0)
    finally:
        agent.stop()
