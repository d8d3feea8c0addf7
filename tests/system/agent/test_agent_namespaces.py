"""A client in a PID namespace of its own (as a container's is) names its processes by
that namespace's numbers: the agent looks them up in its own (PID 2 there is not the
node's kthreadd) and counts exactly; a PID it cannot find there is one line."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused
from tests.support.as_user import become
from tests.support.marks import requires_root
from tests.system.agent import test_agent
from tests.system.agent.test_agent import Agent, User

pytestmark = [pytest.mark.ebpf, requires_root]
agent, shared, users = test_agent.agent, test_agent.shared, test_agent.users  # fixtures
CLONE_NEWPID = 0x20000000


def _in_a_pid_namespace(user: User, work: Path, sock: Path) -> dict[str, object]:
    """Fork, unshare a PID namespace, fork again (PID 1 there), become USER, launch the
    workload (PID 2 there) and probe it through the agent by that number."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWPID) != 0:
                os._exit(2)
            inner = os.fork()
            if inner == 0:
                out: dict[str, object] = {}
                try:
                    become(user.uid, user.gid)
                    target = subprocess.Popen(
                        [str(work)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
                    )
                    assert target.stdin is not None and target.stdout is not None
                    assert target.stdout.readline().strip() == "ready"
                    out["ns_pid"] = target.pid
                    conn = AgentConnection(str(sock))
                    conn.open(target.pid, [f"uprobe:{work}:fast_fn"], 0.02, False, 1000)
                    target.stdin.write("fast 300\n")
                    target.stdin.flush()
                    assert target.stdout.readline().strip() == "ok"
                    out["counts"] = [p.count for p in conn.snapshot(False).probes]
                    try:
                        conn2 = AgentConnection(str(sock))
                        conn2.open(77, [], 0.02, False, 1000)
                    except AgentRefused as exc:
                        out["missing"] = str(exc)
                    target.kill()
                except BaseException as exc:  # never back into pytest
                    out["raised"] = repr(exc)
                finally:
                    os.write(w, json.dumps(out).encode())
                    os._exit(0)
            os.waitpid(inner, 0)
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    return dict(json.loads(data or b"{}"))


def test_a_pid_of_the_clients_namespace_is_the_process_it_means(
    agent: Agent, users: tuple[User, User], shared: Path
) -> None:
    alice, _ = users
    said = _in_a_pid_namespace(alice, shared / "workload", agent.path)
    assert "raised" not in said, said
    assert said["ns_pid"] == 2 and said["counts"] == [300], said
    assert "PID 77 of your PID namespace is not one the agent can find" in str(said["missing"])
