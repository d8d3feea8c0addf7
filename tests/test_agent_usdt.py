"""USDT through the agent for a user (#28): an argument is read from the file the user
opened (bcc's USDT(pid) would open the process's mapped files by path, as root, and
write its semaphores); a semaphore-gated probe's argument is refused in one line, the
target's memory untouched; the gated probe itself works, the kernel raising it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.agent_client import AgentConnection, AgentRefused

from .conftest import requires_root
from .test_agent import Agent, AsUser, User, agent, hear, say, shared, users, workload_as  # noqa: F401 - the fixtures
from .workload import build_c

pytestmark = [pytest.mark.ebpf, requires_root]
GATED = Path(__file__).parent / "targets" / "gated.c"


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


def test_a_gated_probes_argument_is_refused_and_its_semaphore_untouched(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
    gated: Path,
    alices_gated: subprocess.Popen[str],
) -> None:
    spec = f"usdt:{gated}:adaptyst_gated:tick"

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        try:
            conn.open(alices_gated.pid, [spec + "@arg1"], 0.02, False, 1000)
            say(up, refused="")
        except AgentRefused as exc:
            say(up, refused=str(exc))
        hear(down)
        # Without its argument: the kernel raises the semaphore while it is attached.
        conn.open(alices_gated.pid, [spec], 0.02, False, 1000)
        say(up, added=True)
        hear(down)
        say(up, count=conn.snapshot(False).probes[0].count)

    c = AsUser(users[0], client)
    assert c.read()["refused"] == (
        f"{spec}@arg1: reading @arg1 of a semaphore-gated probe is not offered through the "
        "agent (it would write the process's memory as root): probe it without @argN, or "
        "run adaptyst-top as root"
    )
    assert ask(alices_gated, "sem") == "0"  # nothing wrote it
    c.tell()
    assert c.read() == {"added": True}
    assert ask(alices_gated, "sem") == "1"
    assert ask(alices_gated, "hit 3") == "3"
    c.tell()
    assert c.read() == {"count": 3}
    assert c.wait() == 0


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
