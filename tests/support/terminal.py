"""A real terminal for tests: a tmux session on this test run's own tmux server.

The run's own server (its own socket, no user configuration, kept up by a keeper
session while this process lives) because tmux's default server exits with its last
session: a `new-session` sent while it is exiting fails, and the test then read an
empty screen for a minute (CI, stop 42). It also keeps tests off a user's own server."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# A private folder: no name another user can take or a later run (same pid) can reuse.
SOCKET = Path(tempfile.mkdtemp(prefix="adaptyst-tmux-")) / "server"
_STARTS = 5  # a session that did not come up is started again, this many times at most
# Keeps the server up between the tests' sessions, and ends with this process however
# it ends (SIGKILL too): the server then exits with its last session, as tmux's do.
_KEEPER = f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done"


def tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tmux", "-S", str(SOCKET), "-f", "/dev/null", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _kill_server() -> None:
    tmux("kill-server")
    shutil.rmtree(SOCKET.parent, ignore_errors=True)


class Terminal:
    """One named session: started, read, typed into, killed."""

    def __init__(self, session: str) -> None:
        self.session = session

    def start(self, command: str, width: int, height: int) -> None:
        self.kill()
        said = ""
        for _ in range(_STARTS):
            if tmux("has-session", "-t", "keeper").returncode != 0:
                tmux("new-session", "-d", "-s", "keeper", _KEEPER)
            made = tmux(
                "new-session", "-d", "-s", self.session, "-x", str(width), "-y", str(height),
                command,
            )  # fmt: skip
            if made.returncode == 0 and self.alive():
                return
            said = made.stderr.strip()
            time.sleep(0.5)
        raise AssertionError(f"tmux did not start session {self.session}: {said}")

    def alive(self) -> bool:
        return tmux("has-session", "-t", self.session).returncode == 0

    def screen(self, colours: bool = False) -> str:
        return tmux("capture-pane", "-p", *(["-e"] if colours else []), "-t", self.session).stdout

    def keys(self, *keys: str) -> None:
        tmux("send-keys", "-t", self.session, *keys)

    def pane_pid(self) -> int:
        return int(tmux("list-panes", "-t", self.session, "-F", "#{pane_pid}").stdout.split()[0])

    def wait_for(self, what: Callable[[str], bool], timeout: float, step: float = 0.2) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if what(text):
                return text
            time.sleep(step)
        state = "" if self.alive() else " (the tmux session is gone)"
        raise AssertionError(f"timed out{state}; the screen was:\n{text}")

    def kill(self) -> None:
        tmux("kill-session", "-t", self.session)


atexit.register(_kill_server)
