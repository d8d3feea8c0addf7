"""The control channel over real Unix sockets: assignments, peer credentials, malformed
streams, and an application outliving its monitor."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptyst_top.placement.control import ControlClient, ControlServer
from adaptyst_top.placement.protocol import Message, ProtocolError, decode, encode

from .as_user import become
from .conftest import IS_ROOT


def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    return tmp_path / "control.sock"


def test_assignment_round_trip(sock_path: Path) -> None:
    server = ControlServer(sock_path)
    got: list[tuple[str, str, int | None]] = []
    client = ControlClient(["spmv"], lambda t, d, r: got.append((t, d, r)), sock_path, retry_s=0.1)
    try:
        assert wait_until(lambda: any(c.registered for c in server.clients))
        assert server.push("spmv", "opencl:0", "faster") == 1
        assert server.push("gemm", "cuda") == 0  # nobody registered that task
        assert server.push("spmv", "cuda", "explore", runs=5) == 1
        assert wait_until(lambda: len(got) == 2)
        assert got == [("spmv", "opencl:0", None), ("spmv", "cuda", 5)]
        assert wait_until(lambda: len(server.acks) == 2)
        assert server.acks[0] == (os.getpid(), "spmv", "opencl:0")
    finally:
        client.close()
        server.close()
    assert not sock_path.exists()


def test_an_application_that_registers_late_gets_the_standing_assignment(
    sock_path: Path,
) -> None:
    server = ControlServer(sock_path)
    got: list[tuple[str, str, int | None]] = []
    try:
        assert server.push("t", "opencl:0", "faster") == 0  # nobody there yet
        assert server.push("t", "cuda", "explore", runs=3) == 0  # temporary: not kept
        assert server.push("u", "cpu") == 0  # a task this application does not run
        client = ControlClient(["t"], lambda t, d, r: got.append((t, d, r)), sock_path, 0.1)
        try:
            assert wait_until(lambda: got == [("t", "opencl:0", None)])
            time.sleep(0.3)  # nothing else follows
            assert got == [("t", "opencl:0", None)]
        finally:
            client.close()
    finally:
        server.close()


def test_application_outlives_its_monitor_and_reconnects(sock_path: Path) -> None:
    got: list[str] = []
    client = ControlClient(["t"], lambda t, d, r: got.append(d), sock_path, retry_s=0.1)
    try:
        server = ControlServer(sock_path)
        assert wait_until(lambda: client.connected)
        server.push("t", "cpu")
        assert wait_until(lambda: got == ["cpu"])
        server.close()
        assert wait_until(lambda: not client.connected)
        server = ControlServer(sock_path)  # the monitor comes back
        assert wait_until(lambda: client.connected)
        server.push("t", "opencl:0")
        assert wait_until(lambda: got == ["cpu", "opencl:0"])
        server.close()
    finally:
        client.close()


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


def _well_formed(m: Message) -> None:
    """What a successful decode promises its caller."""
    assert m.type in ("hello", "assign", "ack")
    if m.type == "hello":
        assert isinstance(m.fields["pid"], int) and m.fields["pid"] > 0
        assert all(isinstance(t, str) and t for t in m.fields["tasks"])
    else:
        assert isinstance(m.fields["task"], str) and isinstance(m.fields["device"], str)
        assert isinstance(m.fields["reason"], str) and len(m.fields["reason"]) <= 512
        runs = m.fields["runs"]
        assert runs is None or (isinstance(runs, int) and 0 < runs <= 1000)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_decode_returns_a_well_formed_message_or_a_protocol_error(data: bytes) -> None:
    try:
        message = decode(data)
    except ProtocolError as exc:
        assert str(exc)  # says what is wrong
        return
    _well_formed(message)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=12,
    )
)
def test_decode_structured_garbage(obj: object) -> None:
    import json

    for extra in ({}, {"v": 1}, {"v": 1, "type": "assign"}, {"v": 1, "type": "hello"}):
        payload = {**extra, "x": obj} if isinstance(obj, dict) else obj
        try:
            message = decode(json.dumps(payload).encode())
        except ProtocolError as exc:
            assert str(exc)
            continue
        _well_formed(message)


@settings(max_examples=200, deadline=None)
@given(
    task=st.from_regex(r"[A-Za-z0-9_.:-]{1,40}", fullmatch=True),
    device=st.from_regex(r"[A-Za-z0-9_.:-]{1,40}", fullmatch=True),
    runs=st.none() | st.integers(1, 1000),
)
def test_what_is_encoded_decodes_to_itself(task: str, device: str, runs: int | None) -> None:
    message = decode(encode("assign", task=task, device=device, reason="r", runs=runs))
    _well_formed(message)
    assert (message.fields["task"], message.fields["device"], message.fields["runs"]) == (
        task,
        device,
        runs,
    )


def test_a_fuzzed_stream_crashes_neither_side(sock_path: Path) -> None:
    import random

    rng = random.Random(7)
    server = ControlServer(sock_path)
    try:
        for _ in range(20):  # garbage clients
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(sock_path))
            for _ in range(20):
                s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) + b"\n")
            s.sendall(b'{"v":1,"type":"hello","pid":1,"tasks":["t"]}\n')  # a lie about its pid
            s.sendall(b"x" * 10000 + b"\n")
            s.close()
        assert wait_until(lambda: len(server.rejected) >= 20)
        got: list[str] = []
        client = ControlClient(["t"], lambda t, d, r: got.append(d), sock_path, retry_s=0.1)
        assert wait_until(lambda: any(c.registered for c in server.clients))
        server.push("t", "cpu")
        assert wait_until(lambda: got == ["cpu"])  # still serving
        client.close()
    finally:
        server.close()
    # And garbage from a "monitor" to an application.
    raw = socket.socket(socket.AF_UNIX)
    raw.bind(str(sock_path))
    raw.listen(1)
    got2: list[str] = []
    client = ControlClient(["t"], lambda t, d, r: got2.append(d), sock_path, retry_s=0.1)
    conn, _ = raw.accept()
    for _ in range(50):
        conn.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) + b"\n")
    conn.sendall(encode("assign", task="t", device="opencl:0"))
    assert wait_until(lambda: got2 == ["opencl:0"])
    assert len(client.rejected) >= 10
    client.close()
    conn.close()
    raw.close()


def test_new_tasks_on_the_same_connection(sock_path: Path) -> None:
    server = ControlServer(sock_path)
    got: list[str] = []
    client = ControlClient(["a"], lambda t, d, r: got.append(t), sock_path, retry_s=0.1)
    try:
        assert wait_until(lambda: any(c.registered for c in server.clients))
        client.set_tasks(["a", "b"])
        assert wait_until(lambda: server.clients and server.clients[0].tasks == ["a", "b"])
        assert len(server.clients) == 1 and server.push("b", "cpu") == 1
        assert wait_until(lambda: got == ["b"])
    finally:
        client.close()
        server.close()


def test_a_task_added_while_the_first_hello_goes_out_reaches_the_monitor(
    sock_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first hello takes a while to go out (a loaded machine); the application adds
    # a task meanwhile. The monitor must learn of it all the same.
    import adaptyst_top.placement.control as control

    slow = {"first": True}

    def slow_encode(kind: str, **fields: object) -> bytes:
        if kind == "hello" and slow["first"]:
            slow["first"] = False
            time.sleep(0.4)
        return encode(kind, **fields)  # type: ignore[arg-type]

    monkeypatch.setattr(control, "encode", slow_encode)
    server = ControlServer(sock_path)
    client = ControlClient(["a"], lambda t, d, r: None, sock_path, retry_s=0.05)
    try:
        time.sleep(0.2)  # the client thread is inside its first hello now
        client.set_tasks(["a", "b"])
        assert wait_until(lambda: bool(server.clients) and server.clients[0].tasks == ["a", "b"])
        assert server.push("b", "cpu") == 1
    finally:
        client.close()
        server.close()


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


MONITOR = """
import sys
from adaptyst_top.placement.control import ControlServer
server = ControlServer()
print(server.path, flush=True)
sys.stdin.read()
server.close()
"""


def test_a_second_monitor_neither_takes_nor_removes_the_firsts_socket() -> None:
    """Two demos (or --advisor sessions) of one user on one node: the second bound the
    first's path, deleted it on exit, and left the first listening where no application
    finds it. The second listens at a path of its own; each removes only its own."""
    from adaptyst_top.system.line_socket import listening

    def monitor() -> tuple[subprocess.Popen[str], Path]:
        proc = subprocess.Popen(
            [sys.executable, "-c", MONITOR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        return proc, Path(proc.stdout.readline().strip())

    first, first_path = monitor()
    try:
        second, second_path = monitor()
        try:
            assert first_path.name == "control.sock"
            assert second_path == first_path.with_name(f"control-{second.pid}.sock")
            assert listening(first_path) and listening(second_path)
        finally:
            second.communicate("")
        assert listening(first_path) and not second_path.exists()
        with pytest.raises(OSError, match="another process listens at"):
            ControlServer(first_path)  # never taken, even asked for by name
        assert listening(first_path)
    finally:
        first.communicate("")
    assert not first_path.exists()
