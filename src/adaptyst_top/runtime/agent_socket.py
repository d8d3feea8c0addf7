"""The agent's listening socket and the watch on a client that hangs up mid-attach."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import stat
import threading
from pathlib import Path

from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.system.private_files import private_dir

# Connections the kernel queues before accept() (capped by net.core.somaxconn): room
# for every user's connects while one user floods it.
MAX_PENDING = socket.SOMAXCONN


class AgentError(RuntimeError):
    """Why the agent cannot start, in one line."""


def watch_hangup(conn: socket.socket, cancel: StopFlag, done: threading.Event) -> None:
    """While probes attach, a client that goes away cancels the attach."""
    while not done.is_set():
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable:
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
    """The socket, in a folder only root can write (no one can replace it), that every
    user can connect to: who they are is checked per connection."""
    try:
        private_dir(path.parent, mode=0o755)
    except OSError as exc:
        raise AgentError(str(exc)) from None
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            raise AgentError(f"{path} exists and is not our socket: not replaced")
        path.unlink()  # a socket left by an agent that was killed
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o666)
        sock.listen(MAX_PENDING)
    except OSError as exc:
        sock.close()
        raise AgentError(f"cannot listen on {path}: {exc.strerror}") from None
    return sock
