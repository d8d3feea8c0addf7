"""The agent's listening socket and the watch on a client that hangs up mid-attach."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.system import line_socket
from adaptyst_top.system.readable import readable

# Connections the kernel queues before accept() (capped by net.core.somaxconn): room
# for every user's connects while one user floods it.
MAX_PENDING = socket.SOMAXCONN


class AgentError(RuntimeError):
    """Why the agent cannot start, in one line."""


def watch_hangup(conn: socket.socket, cancel: StopFlag, done: threading.Event) -> None:
    """While probes attach, a client that goes away cancels the attach."""
    while not done.is_set():
        if readable([conn], 0.2):
            try:
                peeked = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                peeked = b""
            if not peeked:
                cancel.set()
                return
            done.wait(0.2)  # a request queued behind the open: read after it


def listen(path: Path) -> socket.socket:
    """The agent's socket, in a folder only root can write, that every user can connect
    to: who they are is checked per connection."""
    try:
        return line_socket.listen(path, folder_mode=0o755, backlog=MAX_PENDING)
    except line_socket.SocketError as exc:
        raise AgentError(str(exc)) from None
