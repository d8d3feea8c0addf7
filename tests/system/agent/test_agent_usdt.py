"""USDT through the agent for a user (#28): an argument is read by the agent's own reader
from the notes of the file the user opened (bcc's USDT(pid) would open the process's
mapped files by path, as root, and write its semaphores); a semaphore-gated probe's
argument too, the kernel raising the semaphore while the probe is attached."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote.client import AgentConnection
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.workload import build_c
from tests.system.agent.test_agent import (  # noqa: F401 - the fixtures
    Agent,
    AsUser,
    User,
    agent,
    hear,
    say,
    shared,
    users,
    workload_as,
)

pytestmark = [pytest.mark.ebpf, requires_root]
GATED = TARGETS / "gated.c"


@pytest.fixture(scope="module")
def gated(shared: Path) -> Path:  # noqa: F811
    """The gated program where every user can run it."""
    (shared / "gated-build").mkdir(exist_ok=True)
    built = build_c(GATED, shared / "gated-build")
    dest = shared / "gated"
    shutil.copy(built, dest)
    dest.chmod(0o755)
    return dest


def ask(proc: subprocess.Popen[str], command: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


@pytest.fixture
def alices_gated(users: tuple[User, User], gated: Path) -> Iterator[subprocess.Popen[str]]:  # noqa: F811
    proc = workload_as(users[0], gated)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_gated_probes_argument_is_read_the_kernel_raising_its_semaphore(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
    gated: Path,
    alices_gated: subprocess.Popen[str],
) -> None:
    """Read by the agent's own argument reader from the checked notes, attached at the
    site's file offset with the semaphore's: the kernel raises it while attached (bcc's
    USDT context, refused here before, wrote the target's memory as root)."""
    spec = f"usdt:{gated}:adaptyst_gated:tick@arg1:int"

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(alices_gated.pid, [spec], 0.02, False, 1000)
        say(up, added=True)
        hear(down)
        snap = conn.snapshot(False)
        say(up, counts={str(p.key): p.count for p in snap.probes if p.count})
        hear(down)

    assert ask(alices_gated, "sem") == "0"
    c = AsUser(users[0], client)
    assert c.read() == {"added": True}
    assert ask(alices_gated, "sem") == "1"
    assert ask(alices_gated, "hit 3") == "3"
    c.tell()
    assert c.read() == {"counts": {"0": 1, "1": 1, "2": 1}}
    c.tell()
    assert c.wait() == 0
    deadline = time.monotonic() + 10
    while ask(alices_gated, "sem") != "0" and time.monotonic() < deadline:
        time.sleep(0.05)  # the session ended with the client: the kernel lowers it
    assert ask(alices_gated, "sem") == "0"


def test_a_users_usdt_argument_is_read_from_the_file_they_opened(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    alice = users[0]
    target = workload_as(alice, shared / "workload")
    spec = f"usdt:{shared / 'workload'}:adaptyst_test:task_begin@arg1:str"

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        conn.open(target.pid, [spec], 0.02, False, 1000)
        say(up, opened=True)
        hear(down)
        snap = conn.snapshot(False)
        say(up, counts={str(p.key): p.count for p in snap.probes if p.count})

    try:
        c = AsUser(alice, client)
        assert c.read() == {"opened": True}
        for command in ("task gemm 5 10", "task spmv 3 10"):
            assert ask(target, command) == "ok"
        c.tell()
        assert c.read() == {"counts": {"gemm": 5, "spmv": 3}}
        assert c.wait() == 0
    finally:
        target.kill()
        target.wait()
