"""doctor's `agent-memory` line: the bounds the agent's cgroup enforces (its unit's
MemoryMax= and MemoryHigh=) and its group's use, as a user sees them. The agent is
moved into a memory cgroup this test makes (v1's controller where the node mounts it
so, else v2's), first without a bound, then with one; then moved back."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.system.cgroup_memory import parse_cgroups, parse_mounts
from adaptyst_top.system.line_socket import peer_credentials
from tests.support.marks import requires_root
from tests.system.agent.test_agent import (  # noqa: F401 - fixtures
    CLI,
    Agent,
    User,
    agent,
    shared,
    users,
)

pytestmark = [requires_root]


def listener(path: Path) -> int:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return peer_credentials(s)[0]
    finally:
        s.close()


@contextlib.contextmanager
def own_group(pid: int) -> Iterator[tuple[Path, str]]:
    """A new memory cgroup holding PID (its folder, and "v1" or "v2"), PID moved back
    and the group removed after."""
    groups = dict(parse_cgroups(Path(f"/proc/{pid}/cgroup").read_text()))
    mounts = parse_mounts(Path("/proc/self/mountinfo").read_text())
    name = f"adaptyst-test-{uuid.uuid4().hex[:6]}"
    if "memory" in groups and "memory" in mounts:
        kind, mount, was = "v1", mounts["memory"], groups["memory"]
        folder = mount / was.lstrip("/") / name  # beside nothing: under PID's own
    elif "" in groups and "" in mounts:
        kind, mount, was = "v2", mounts[""], groups[""]
        if "memory" not in (mount / "cgroup.subtree_control").read_text().split():
            pytest.fail("cgroup v2 without the memory controller at its root")
        folder = mount / name  # the root may hold processes and enable controllers
    else:
        pytest.fail("no memory cgroup on this node")
    folder.mkdir()
    try:
        (folder / "cgroup.procs").write_text(str(pid))
        try:
            yield folder, kind
        finally:
            # The agent, and what it started meanwhile (a user's workers, started as her
            # doctor said hello), back where the agent was.
            back = mount / was.lstrip("/") / "cgroup.procs"
            for moved in (folder / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):  # ended meanwhile
                    back.write_text(moved)
    finally:
        folder.rmdir()


def doctor_line(user: User, path: Path) -> str:
    done = subprocess.run(
        [*CLI, "doctor", "--no-smoke", "--agent", str(path)],
        capture_output=True, text=True, timeout=120, user=user.uid, group=user.gid,
        extra_groups=[],
    )  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.split()[:1] == ["agent-memory"]]
    assert len(lines) == 1, done.stdout + done.stderr
    return lines[0]


def test_doctor_says_what_bounds_the_agents_memory(
    agent: Agent,  # noqa: F811 - the fixture
    users: tuple[User, User],  # noqa: F811
) -> None:
    alice, _ = users
    pid = listener(agent.path)
    with own_group(pid) as (folder, kind):
        line = doctor_line(alice, agent.path)
        assert line.split()[1] == "degraded" and "no MemoryMax" in line, line
        assert "fix: MemoryMax= in its unit" in line, line
        if kind == "v1":
            (folder / "memory.limit_in_bytes").write_text(str(3 << 29))
        else:
            (folder / "memory.high").write_text(str(1 << 30))
            (folder / "memory.max").write_text(str(3 << 29))
        line = doctor_line(alice, agent.path)
        assert line.split()[1] == "ok", line
        assert "MemoryMax 1.5 GiB" in line, line
        assert ("MemoryHigh 1.0 GiB" in line) == (kind == "v2"), line
        used = int(line.split(" MiB in use")[0].rsplit(None, 1)[-1])
        # The group's own figure, not the node's (charges made before the move stay
        # with the old group: a unit's agent is in its group from its start).
        assert 0 <= used < 1536, line
        assert folder.name in line, line
    assert os.kill(pid, 0) is None  # the agent lived through it
