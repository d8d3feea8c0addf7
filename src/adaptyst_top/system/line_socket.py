"""JSON lines over a Unix socket, as both of our protocols speak them: the node agent's
(runtime/remote/protocol.py) and the placement control channel's (placement/protocol.py).

One place for what they share: a message is one JSON object with a `type` on one line,
each line capped; versions are exact integers, said in the hello; who is at the other
end comes from the kernel (SO_PEERCRED), never from what it says; a listening socket
lives in a folder no other user can write. Each protocol keeps only its vocabulary."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import orjson

from adaptyst_top.system.private_files import private_dir


class ProtocolError(ValueError):
    """A message that breaks the protocol, in one line."""


class SocketError(OSError):
    """Why a socket cannot listen, in one line."""


def encode(version: int, kind: str, **fields: Any) -> bytes:
    # orjson: a 200-row snapshot in a tenth of json's time, every second, per client.
    return orjson.dumps({"v": version, "type": kind, **fields}) + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """LINE as a message: a JSON object (UTF-8) with a string `type`; else ProtocolError."""
    try:
        msg = orjson.loads(line)  # UTF-8 checked too
    except (orjson.JSONDecodeError, RecursionError):
        raise ProtocolError("a message that is not JSON") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError("a message without a type")
    return msg


def same_version(msg: dict[str, Any], version: int) -> bool:
    """MSG says VERSION: an integer, exactly (a JSON `true` equals 1 in Python)."""
    v = msg.get("v")
    return isinstance(v, int) and not isinstance(v, bool) and v == version


def check_hello(msg: dict[str, Any], side: str, version: int) -> None:
    """A hello from the other SIDE: ProtocolError, in one line, when versions differ."""
    if msg.get("type") != "hello":
        raise ProtocolError(f"the {side} did not say hello first")
    if not same_version(msg, version):
        raise ProtocolError(
            f"the {side} speaks protocol version {msg.get('v')!r}, this adaptyst-top "
            f"{version}: use the same version on both sides"
        )


class Stream(Protocol):
    def recv(self, size: int) -> bytes: ...


class LineReader:
    """Lines from a socket (or any stream with recv), each at most LIMIT bytes. A longer
    one is a ProtocolError, or, with ON_LONG, dropped whole (ON_LONG is told) and the
    reading goes on. A timeout of the socket's leaves what was read for the next call."""

    def __init__(self, sock: Stream, limit: int, on_long: Callable[[], None] | None = None) -> None:
        self.sock = sock
        self.limit = limit
        self.on_long = on_long
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no newline
        self._dropping = False  # inside a line too long, dropped up to its newline

    def line(self) -> bytes | None:
        """The next line, or None at the end of the stream. Each byte is looked at once
        and the buffer grows in place: a line past LIMIT is refused in time linear in
        LIMIT (64 MB took 35 s of CPU with a buffer copied at each read)."""
        while True:
            while (end := self._buf.find(b"\n", self._scanned)) < 0:
                self._scanned = len(self._buf)
                if len(self._buf) > self.limit:
                    self._too_long()
                    self._buf.clear()
                    self._scanned = 0
                    self._dropping = True
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    if self._buf and not self._dropping:
                        raise ProtocolError("the connection ended inside a message")
                    return None
                self._buf += chunk
            line = bytes(self._buf[:end])
            del self._buf[: end + 1]
            self._scanned = 0
            if self._dropping:
                self._dropping = False
                continue
            if end > self.limit:
                self._too_long()
                continue
            return line

    def _too_long(self) -> None:
        if self.on_long is None:
            raise ProtocolError(f"a message longer than {self.limit} bytes")
        if not self._dropping:
            self.on_long()

    def read(self) -> dict[str, Any] | None:
        """The next message (decode), or None at the end of the stream."""
        line = self.line()
        return None if line is None else decode(line)


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end, as the kernel took them at
    connect()."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return pid, uid, gid


def listening(path: Path) -> bool:
    """Whether a process accepts connections at the socket PATH (a socket left by a
    killed one refuses them)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
        return True
    except BlockingIOError:
        return True  # EAGAIN: its backlog is full, so someone listens
    except OSError:
        return False
    finally:
        probe.close()


def listen(path: Path, folder_mode: int, backlog: int) -> socket.socket:
    """A socket at PATH that every user can connect to (who they are is checked per
    connection), in a folder made or checked private with FOLDER_MODE, so that no one
    else can replace it; a socket of ours left there by a killed process is replaced,
    anything else is refused (SocketError)."""
    try:
        private_dir(path.parent, mode=folder_mode)
    except OSError as exc:
        raise SocketError(str(exc)) from None
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            raise SocketError(f"{path} exists and is not our socket: not replaced")
        if listening(path):  # a second monitor (or agent) took the path of the first
            raise SocketError(f"another process listens at {path}: not replaced")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o666)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise SocketError(f"cannot listen on {path}: {exc.strerror}") from None
    return sock
