"""`--host NODE` from a login node: a real sshd on localhost (its own host key, a test
user with a key, started here on a free port), `ssh NODE adaptyst-top bridge` joined to
the node's agent; the agent decides as for the SSH user. adaptyst-top on the "node" is
this checkout's package run by Debian's /usr/bin/python3, as a site would install it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote.client import REMOTE_ENV, SSH_ENV, AgentConnection
from tests.support.installed import install_checkout
from tests.support.marks import requires_root
from tests.system.agent.test_agent import CLI, Agent, User, _useradd, nothing_left, workload_as

pytestmark = [pytest.mark.ebpf, requires_root]
SSHD = Path("/usr/sbin/sshd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def node(workload_bin: Path) -> Iterator[tuple[Path, User, dict[str, str]]]:
    """(a folder every user can read, the SSH user, the client's environment)."""
    assert SSHD.exists(), "openssh-server (scripts/setup.sh installs it)"
    d = Path(tempfile.mkdtemp(prefix="adt-ssh-"))
    d.chmod(0o755)
    user = _useradd(f"adt-s-{os.urandom(3).hex()}", shell="/bin/sh")
    # No password, but not locked: sshd (without PAM) refuses a locked account's keys.
    subprocess.run(["usermod", "-p", "*", user.name], check=True)
    # sshd's privilege separation: made as Debian's ssh service makes it, and left (another
    # module's sshd, the job view's nodes, may run beside this one).
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = None
    try:
        launcher = install_checkout(d, str(d / "agent.sock"))
        shutil.copy(workload_bin, d / "workload")
        (d / "workload").chmod(0o755)
        for key in ("host_key", "user_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True
            )
        keys = d / "authorized_keys"
        keys.mkdir(mode=0o755)
        shutil.copy(d / "user_key.pub", keys / user.name)
        (keys / user.name).chmod(0o644)
        port = free_port()
        config = d / "sshd_config"
        config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
            f"PidFile {d / 'sshd.pid'}\nAuthorizedKeysFile {keys}/%u\n"
            f"AllowUsers {user.name}\nPermitRootLogin no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        )
        proc = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(config)],
            stderr=open(d / "sshd.log", "wb"),  # noqa: SIM115 - closed with the process
        )
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, (d / "sshd.log").read_text()
            time.sleep(0.05)
        env = {
            **os.environ,
            SSH_ENV: f"ssh -p {port} -i {d / 'user_key'} -o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            REMOTE_ENV: str(launcher),
        }
        yield d, user, env
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        subprocess.run(["pkill", "-u", user.name], check=False)
        time.sleep(0.2)
        subprocess.run(["userdel", user.name], check=False)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def agent(node: tuple[Path, User, dict[str, str]]) -> Iterator[Agent]:
    a = Agent(node[0] / "agent.sock")
    try:
        yield a
    finally:
        a.stop()
        assert nothing_left(5.0)


RUN_S = "8"


def record(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "record", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_record_on_another_node_through_ssh_is_a_local_record(
    node: tuple[Path, User, dict[str, str]], agent: Agent
) -> None:
    d, user, env = node
    target = workload_as(user, d / "workload", "forever", "100")
    spec = f"uprobe:{d / 'workload'}:fast_fn"
    try:
        remote = record(
            env, "--host", f"{user.name}@127.0.0.1", "--pid", str(target.pid),
            # The run's time counts from the start, ssh and the compile and attach
            # included: room for them on a loaded 2-core machine (over 2 s seen).
            "--probe", spec, "--duration", RUN_S,
        )  # fmt: skip
        assert remote.returncode == 0, remote.stderr
        local = record(env, "--agent", str(agent.path), "--pid", str(target.pid),
                       "--probe", spec, "--duration", RUN_S)  # fmt: skip
        assert local.returncode == 0, local.stderr
        far, near = (json.loads(r.stdout.splitlines()[-1]) for r in (remote, local))
        assert far.keys() == near.keys() and far["final"] and far["schema_version"] == 1
        # The same fields, but for one present only when its figures say so (a raw
        # minimum below the probe's cost: each session's calls are their own).
        figured = {"corrected_ns"}
        assert far["probes"][0].keys() - figured == near["probes"][0].keys() - figured
        assert far["probes"][0]["count"] > 1000 and far["probes"][0]["state"] == "attached"
        assert [d["id"] for d in far["devices"]] == [d["id"] for d in near["devices"]]
    finally:
        target.kill()
        target.wait()


def test_a_profile_on_another_node_through_ssh(
    node: tuple[Path, User, dict[str, str]], agent: Agent
) -> None:
    """--profile with --host: sampled by the node's agent, unwound there by a process of
    the SSH user's, carried back like any snapshot."""
    d, user, env = node
    target = workload_as(user, d / "workload", "forever", "100")
    try:
        r = record(env, "--host", f"{user.name}@127.0.0.1", "--pid", str(target.pid),
                   "--profile-hz", "199", "--duration", RUN_S)  # fmt: skip
        assert r.returncode == 0, r.stderr
        profile = json.loads(r.stdout.splitlines()[-1])["profile"]
        assert profile["hz"] == 199 and profile["samples"] > 0
        assert "unwinder" not in profile.get("note", "")  # it counted to the end
        names = {f["name"] for f in profile["functions"]}
        assert "held_fn" in names, names
    finally:
        target.kill()
        target.wait()


def test_the_ssh_user_is_who_the_agent_checks(
    node: tuple[Path, User, dict[str, str]], agent: Agent
) -> None:
    d, user, env = node
    roots = subprocess.Popen([str(d / "workload"), "forever", "100"], stdout=subprocess.DEVNULL)
    try:
        r = record(env, "--host", f"{user.name}@127.0.0.1", "--pid", str(roots.pid),
                   "--probe", f"uprobe:{d / 'workload'}:fast_fn", "--duration", "1")  # fmt: skip
        assert r.returncode == 1
        assert r.stderr.strip() == (
            f"adaptyst-top: PID {roots.pid} belongs to root; you may probe your own processes"
        )
    finally:
        roots.kill()
        roots.wait()


def test_a_broken_connection_is_reported_and_retried(
    node: tuple[Path, User, dict[str, str]], agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, user, env = node
    for k in (SSH_ENV, REMOTE_ENV):
        monkeypatch.setenv(k, env[k])
    target = workload_as(user, d / "workload", "forever", "100")
    conn = AgentConnection(str(agent.path), host=f"{user.name}@127.0.0.1")
    try:
        conn.open(target.pid, [f"uprobe:{d / 'workload'}:fast_fn"], 0.02, False, 1000)
        assert conn.snapshot(with_hist=False).probes[0].state == "attached"
        # The node's end of the connection goes (what a dropped link does to it).
        subprocess.run(["pkill", "-KILL", "-u", user.name, "-f", "cli.start bridge"], check=True)
        back = conn.snapshot(with_hist=False)
        assert any(
            "to the agent at" in w and "(ssh) broke" in w and "is back: probes re-added" in w
            for w in back.warnings
        ), back.warnings
        time.sleep(0.3)
        assert conn.snapshot(with_hist=False).probes[0].count > 0
    finally:
        conn.close()
        target.send_signal(signal.SIGKILL)
        target.wait()


def test_closing_a_link_whose_ssh_has_gone_raises_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in CI: a send into the pipe of an ssh that had just died left its bytes in
    stdin's buffer, and close() flushed them into the same closed pipe (BrokenPipeError
    out of the reconnect that was to report it)."""
    from adaptyst_top.runtime.remote.client import SshTransport

    monkeypatch.setenv(SSH_ENV, "true")  # an "ssh" that ends at once
    link = SshTransport("nowhere")
    link.proc.wait(10)
    with pytest.raises(BrokenPipeError):
        link.send(b'{"v":1,"type":"snapshot","with_hist":false}\n')
    link.close()  # nothing raised: the bytes had nowhere to go
