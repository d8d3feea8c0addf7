"""A path a user names is opened as that user, once, and read and probed through that
descriptor: a symbolic link the user swaps between their own program and another
user's private library, as fast as they can, never gets them a symbol of the other
user's file, in `list --binary`, in `add`, or in the picker's list."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused
from adaptyst_top.system.targets import resolve_target
from tests.support.marks import requires_root
from tests.system.agent import test_agent
from tests.system.agent.test_agent import Agent, AsUser, User, hear, say, workload_as

pytestmark = [pytest.mark.ebpf, requires_root]
agent, shared, users = test_agent.agent, test_agent.shared, test_agent.users  # fixtures
LIBM = resolve_target("m")  # this machine's libm, wherever its ld.so.cache has it
PRIVATE = "cbrt"  # a function of the other user's library only
FLIP = """
import os, sys, time
folder, targets = sys.argv[1], sys.argv[2:]
i = 0
while True:
    os.symlink(targets[i % 2], f"{folder}/next")
    os.replace(f"{folder}/next", f"{folder}/lnk")
    i += 1
    if i % 64 == 0:
        time.sleep(0.0005)
"""


@pytest.fixture
def swapped(shared: Path, users: tuple[User, User]) -> Iterator[Path]:
    """alice's folder with a link alice keeps swapping between her own program and bob's
    copy of libm in bob's 0700 folder."""
    alice, bob = users
    theirs = Path(tempfile.mkdtemp(prefix="bob-private-", dir=shared))
    mine = Path(tempfile.mkdtemp(prefix="alice-links-", dir=shared))
    flipper = None
    try:
        shutil.copy(LIBM, theirs / "libm.so.6")
        for p in (theirs, theirs / "libm.so.6"):
            os.chown(p, bob.uid, bob.gid)
        theirs.chmod(0o700)
        os.chown(mine, alice.uid, alice.gid)
        mine.chmod(0o755)
        python = shutil.which("python3", path="/usr/bin")  # one alice may run
        assert python, "Debian's /usr/bin/python3"
        flipper = subprocess.Popen(
            [python, "-c", FLIP, str(mine), str(shared / "workload"), str(theirs / "libm.so.6")],
            user=alice.uid,
            group=alice.gid,
            extra_groups=[],
        )
        time.sleep(0.2)
        assert flipper.poll() is None, "the flipper runs"
        yield mine / "lnk"
    finally:
        if flipper is not None:
            flipper.kill()
            flipper.wait()
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)


def test_list_binary_reads_only_what_the_user_opened(
    agent: Agent, users: tuple[User, User], swapped: Path
) -> None:
    alice, _ = users

    def client(up: int, down: int) -> None:
        names: set[str] = set()
        refused = listed = 0
        conn = AgentConnection(str(agent.path))
        for _ in range(300):
            try:
                objects, _ = conn.list_objects(
                    {"binary": str(swapped), "pid": None, "functions": True, "usdt": False}
                )
            except AgentRefused:
                refused += 1
                continue
            listed += 1
            names.update(f["name"] for o in objects for f in o.get("functions", []))
        say(up, leaked=PRIVATE in names, ours="fast_fn" in names, refused=refused, listed=listed)

    c = AsUser(alice, client)
    said = c.read()
    assert c.wait() == 0
    assert said["leaked"] is False, said
    assert said["ours"] is True and said["listed"] > 0, said  # the race was run


def test_add_attaches_only_to_what_the_user_opened(
    agent: Agent, users: tuple[User, User], shared: Path, swapped: Path
) -> None:
    alice, _ = users
    target = workload_as(alice, shared / "workload")

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, [f"uprobe:{shared / 'workload'}:fast_fn"], 0.02, False, 1000)
        refused = 0
        for _ in range(40):
            try:
                conn.add(f"uprobe:{swapped}:{PRIVATE}")
            except AgentRefused:
                refused += 1
        time.sleep(1.0)  # the adds build in the background
        snap = conn.snapshot(with_hist=False)
        attached = [p.name for p in snap.probes if p.state == "attached"]
        say(up, attached=attached, refused=refused)
        hear(down)

    try:
        c = AsUser(alice, client)
        said = c.read()
        c.tell()
        assert c.wait() == 0
        assert said["attached"] == ["fast_fn"], said
    finally:
        target.kill()
        target.wait()


def test_the_agents_own_descriptors_are_no_way_in(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    """The opening thread is the agent's: /proc/self/fd/N would reopen what the agent
    holds for another user (bob's pinned library in his 0700 folder). Magic links are
    never followed for a user."""
    alice, bob = users
    theirs = Path(tempfile.mkdtemp(prefix="bob-only-", dir=shared))
    shutil.copy(LIBM, theirs / "libm.so.6")
    for p in (theirs, theirs / "libm.so.6"):
        os.chown(p, bob.uid, bob.gid)
    theirs.chmod(0o700)
    bobs = workload_as(bob, shared / "workload")

    def bob_client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(bobs.pid, [f"uprobe:{theirs / 'libm.so.6'}:{PRIVATE}"], 0.02, False, 1000)
        say(up, ready=True)
        hear(down)

    def alice_client(up: int, down: int) -> None:
        paths = [p for n in fds for p in (f"/proc/self/fd/{n}", f"/proc/{agent.proc.pid}/fd/{n}")]
        seen = []
        conn = AgentConnection(str(agent.path))
        for path in paths:
            try:
                objects, _ = conn.list_objects(
                    {"binary": path, "pid": None, "functions": True, "usdt": False}
                )
                seen += [f["name"] for o in objects for f in o.get("functions", [])]
            except AgentRefused:
                pass
        say(up, leaked=PRIVATE in seen, tried=len(paths))

    b = AsUser(bob, bob_client)
    try:
        assert b.read() == {"ready": True}
        fd_dir = Path(f"/proc/{agent.proc.pid}/fd")
        fds = [n.name for n in fd_dir.iterdir() if os.readlink(n) == str(theirs / "libm.so.6")]
        assert fds, "the agent holds bob's library open for his session"
        a = AsUser(alice, alice_client)
        said = a.read()
        assert a.wait() == 0
        assert said == {"leaked": False, "tried": 2 * len(fds)}
        b.tell()
        assert b.wait() == 0
    finally:
        bobs.kill()
        bobs.wait()
        shutil.rmtree(theirs, ignore_errors=True)
