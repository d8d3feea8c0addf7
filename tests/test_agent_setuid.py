"""A user's probes count nothing in a process once it stops being theirs, from its
first instruction: a real setuid program (passwd) exec'd in the probed process, another
user's execute-only program, and a process that makes itself not dumpable. Each
target calls getuid() a known number of times first: those, and only those, count."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.agent_client import AgentConnection

from . import test_agent
from .conftest import requires_root
from .test_agent import Agent, AsUser, User, driven_as, hear, say

agent, shared, users = test_agent.agent, test_agent.shared, test_agent.users  # fixtures

pytestmark = [pytest.mark.ebpf, requires_root]
OURS = 300  # getuid() calls the target makes while it is the user's
SPECS = ["uprobe:c:getuid", "uprobe:c:getpwnam_r", "uprobe:c:getspnam"]


@pytest.fixture
def exec_only(shared: Path, users: tuple[User, User]) -> Iterator[Path]:
    """The other user's copy of id(1), which anyone may run and only they may read."""
    _, bob = users
    path = shared / "bobs-id"
    shutil.copy("/usr/bin/id", path)
    os.chown(path, bob.uid, bob.gid)
    path.chmod(0o711)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def _python() -> str:
    python = shutil.which("python3", path="/usr/bin")
    assert python, "Debian's /usr/bin/python3"
    return python


def _counts_after(agent: Agent, alice: User, then: str) -> dict[str, int]:
    """Probe alice's process as alice; it calls getuid() OURS times, then runs THEN
    (Python): what each probe counted once it is done."""
    target = driven_as(
        alice,
        _python(),
        "-c",
        "import ctypes, os, sys, time\n"
        "sys.stdin.readline()\n"
        f"for _ in range({OURS}): os.getuid()\n" + then,
    )

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, SPECS, 0.02, False, 1000)
        say(up, ready=True)
        hear(down)
        snap = conn.snapshot(with_hist=False)
        say(up, counts={p.name: p.count for p in snap.probes})

    try:
        time.sleep(0.3)  # Python is up, reading its standard input
        c = AsUser(alice, client)
        assert c.read() == {"ready": True}
        assert target.stdin is not None
        target.stdin.write("go\n")
        target.stdin.flush()
        target.wait(timeout=30)
        c.tell()
        counts = c.read()["counts"]
        assert c.wait() == 0
        assert isinstance(counts, dict)
        return counts
    finally:
        target.kill()
        target.wait()


@pytest.mark.parametrize("program", ["passwd", "execute-only"])
def test_nothing_counts_in_a_program_that_is_not_the_users(
    agent: Agent, users: tuple[User, User], exec_only: Path, program: str
) -> None:
    """passwd -S (setuid root) reads the shadow file with getspnam and asks getuid; the
    other user's program asks getuid too. None of it is the user's to see."""
    alice, _ = users
    argv = ["/usr/bin/passwd", "-S"] if program == "passwd" else [str(exec_only), "-ru"]
    counts = _counts_after(agent, alice, f"os.execv({argv[0]!r}, {argv!r})\n")
    assert counts == {"getuid": OURS, "getpwnam_r": 0, "getspnam": 0}


def test_nothing_counts_once_a_process_says_it_is_not_dumpable(
    agent: Agent, users: tuple[User, User]
) -> None:
    alice, _ = users
    counts = _counts_after(
        agent, alice, "ctypes.CDLL(None).prctl(4, 0)\nfor _ in range(1000): os.getuid()\n"
    )
    assert counts["getuid"] == OURS
