"""A user's probes count nothing in a process once it stops being theirs, from its
first instruction: a real setuid program (passwd) exec'd in the probed process, another
user's execute-only program, and a process that makes itself not dumpable. Each
target calls getuid() a known number of times first: those, and only those, count."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote.client import AgentConnection
from tests.support.marks import requires_root
from tests.system.agent import test_agent
from tests.system.agent.test_agent import Agent, AsUser, User, hear, say

agent, shared, users = test_agent.agent, test_agent.shared, test_agent.users  # fixtures

# serial: sets fs.suid_dumpable
pytestmark = [pytest.mark.serial, pytest.mark.ebpf, requires_root]
OURS = 300  # getuid() calls the target makes while it is the user's
SPECS = ["uprobe:c:getuid", "uprobe:c:getpwnam_r", "uprobe:c:getspnam", "uprobe:c:getpwuid"]


@pytest.fixture
def other_id(shared: Path, users: tuple[User, User], program: str) -> Iterator[Path]:
    """A copy of id(1) that anyone may run and that is not simply the user's to see:
    the other user's execute-only one, one setgid to the other user's group, or one
    with a file capability (permitted, not effective)."""
    _, bob = users
    path = shared / f"id-{program}"
    shutil.copy("/usr/bin/id", path)
    if program == "execute-only":
        os.chown(path, bob.uid, bob.gid)
        path.chmod(0o711)
    elif program == "setgid":
        os.chown(path, 0, bob.gid)
        path.chmod(0o2755)
    elif program == "file-capability":
        # VFS_CAP_REVISION_2, CAP_NET_RAW (13) permitted: what setcap cap_net_raw+p writes.
        os.setxattr(path, "security.capability", struct.pack("<5I", 0x02000000, 1 << 13, 0, 0, 0))
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def _python() -> str:
    python = shutil.which("python3", path="/usr/bin")
    assert python, "Debian's /usr/bin/python3"
    return python


def _counts_after(agent: Agent, alice: User, then: str) -> dict[str, int]:
    """Probe alice's process as alice. It starts a child (followed: its probes attach
    for it) that calls getuid() OURS times, then runs THEN (Python). The parent lives on,
    so the session does: what each probe counted once the child is done."""
    target = subprocess.Popen(
        [
            _python(),
            "-c",
            "import ctypes, os, sys, time\n"
            "sys.stdin.readline()\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    os.dup2(os.open('/dev/null', os.O_WRONLY), 1)  # the pipe is the parent's\n"
            "    time.sleep(1.0)  # followed by then\n"
            f"    for _ in range({OURS}): os.getuid()\n"
            + "".join(f"    {line}\n" for line in then.splitlines())
            + "    os._exit(0)\n"
            "os.waitpid(child, 0)\n"
            "print('done', flush=True)\n"
            "sys.stdin.readline()\n",
        ],
        user=alice.uid,
        group=alice.gid,
        extra_groups=[],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, SPECS, 0.02, False, 1000)
        say(up, ready=True)
        hear(down)
        snap = conn.snapshot(with_hist=False)
        counts = {p.name: p.count for p in snap.probes}
        say(up, counts=counts, warnings=list(snap.warnings))

    try:
        time.sleep(0.3)  # Python is up, reading its standard input
        c = AsUser(alice, client)
        assert c.read() == {"ready": True}
        assert target.stdin is not None and target.stdout is not None
        target.stdin.write("go\n")
        target.stdin.flush()
        assert target.stdout.readline().strip() == "done"
        c.tell()
        said = c.read()
        assert c.wait() == 0
        counts = said["counts"]
        assert isinstance(counts, dict), said
        return counts
    finally:
        target.kill()
        target.wait()


@pytest.fixture
def suid_dumpable(request: pytest.FixtureRequest) -> Iterator[None]:
    """fs.suid_dumpable as the case asks (1: a setuid exec stays dumpable), put back."""
    knob = Path("/proc/sys/fs/suid_dumpable")
    before = knob.read_text()
    knob.write_text(str(request.param))
    try:
        yield
    finally:
        knob.write_text(before)


@pytest.mark.parametrize(
    ("program", "suid_dumpable"),
    [
        ("passwd", 0),
        ("passwd", 1),
        ("execute-only", 0),
        ("setgid", 0),
        ("setgid", 1),
        ("file-capability", 1),
    ],
    indirect=["suid_dumpable"],
)
def test_nothing_counts_in_a_program_that_is_not_the_users(
    agent: Agent, users: tuple[User, User], other_id: Path, program: str, suid_dumpable: None
) -> None:
    """passwd -S (setuid root) reads the shadow file with getspnam and asks getuid; the
    other programs ask getuid too. None of it is the user's to see, whatever
    fs.suid_dumpable says (at 1, seen: 301 getuid and getspnam counted in passwd; the
    setgid and file-capability execs counted until their gids and capabilities were
    checked too)."""
    alice, _ = users
    argv = ["/usr/bin/passwd", "-S"] if program == "passwd" else [str(other_id), "-run"]
    counts = _counts_after(agent, alice, f"os.execv({argv[0]!r}, {argv!r})\n")
    assert counts == {"getuid": OURS, "getpwnam_r": 0, "getspnam": 0, "getpwuid": 0}


def test_nothing_counts_once_a_process_says_it_is_not_dumpable(
    agent: Agent, users: tuple[User, User]
) -> None:
    alice, _ = users
    counts = _counts_after(
        agent, alice, "ctypes.CDLL(None).prctl(4, 0)\nfor _ in range(1000): os.getuid()"
    )
    assert counts["getuid"] == OURS
