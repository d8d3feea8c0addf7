"""The control channel over real Unix sockets: assignments, peer credentials, malformed
streams, and an application outliving its monitor."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptyst_top.placement.control import ControlClient, ControlServer
from adaptyst_top.placement.protocol import Message, ProtocolError, decode, encode
from tests.support.waits import wait_until


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
