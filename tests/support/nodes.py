"""A few compute nodes on this one machine, for a job's view from a login node (this
process). Each node is a UTS and mount namespace: its own hostname, its own /etc/hosts
(every node at its own loopback address, 127.0.0.N: all of 127.0.0.0/8 is this machine's
loopback), its own sshd bound to that address, its own agent socket and its own slurmd,
under one slurmctld (tests/support/slurm.py). The agent and adaptyst-top on a node are
this checkout's package, as a site installs them; the SSH user logs in with a key of its
own, through an ssh config that names the nodes (theirs on every node, as a shared home
has it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cli import CLI
from tests.support.installed import end, install_checkout
from tests.support.slurm import Slurm, SlurmNode

SSHD = Path("/usr/sbin/sshd")
START_TIMEOUT_S = 30.0
FIRST_ADDRESS = 11  # node1 at 127.0.0.11


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    name: str
    addr: str
    holder: subprocess.Popen[bytes]  # holds its namespaces open
    ssh_port: int = 0
    sshd: subprocess.Popen[bytes] | None = None
    agent: subprocess.Popen[bytes] | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def enter(self) -> tuple[str, ...]:
        return ("nsenter", "-t", str(self.holder.pid), "-u", "-m", "--")


class Nodes:
    """COUNT nodes (node1..), their sshd letting USERS (name, uid, gid) in, each with a
    key of their own, each node with an agent run as the unit runs it (AGENT_PREFIX: the
    capability bounds)."""

    def __init__(self, count: int, users: Sequence[Any], agent_prefix: list[str]) -> None:
        assert SSHD.exists(), "openssh-server (scripts/setup.sh installs it)"
        self.users = list(users)
        self.agent_prefix = agent_prefix
        self.base = Path(tempfile.mkdtemp(prefix="adt-nodes-"))
        self.base.chmod(0o755)
        self.nodes: list[Node] = []
        self.slurm: Slurm | None = None
        try:
            self._files()
            for i in range(1, count + 1):
                self.nodes.append(self._holder(f"node{i}", f"127.0.0.{FIRST_ADDRESS + i - 1}"))
            self.slurm = Slurm([SlurmNode(n.name, n.addr, n.enter) for n in self.nodes])
            for node in self.nodes:
                self.start_agent(node)
                self.start_sshd(node)
            self._client_config()
        except BaseException:
            self.stop()
            raise

    # ----- files every node shares ------------------------------------------------------

    def _files(self) -> None:
        d = self.base
        (d / "agents").mkdir(mode=0o755)
        # The node's own agent: its socket is under its hostname (its namespace's).
        # Run by this interpreter, whose libraries a site's install has: a job's relay
        # on a node merges as the login node does (the bridge alone needs none).
        self.launcher = install_checkout(
            d, f"{d / 'agents'}/$(hostname)/agent.sock", sys.executable
        )
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True
        )
        keys = d / "authorized_keys"
        keys.mkdir(mode=0o755)
        for user in self.users:
            home = self.home(user)  # the user's own: their key, their ssh config
            home.mkdir(mode=0o700)
            os.chown(home, user.uid, user.gid)
            key = home / "key"
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
            )
            for f in (key, key.with_suffix(".pub")):
                os.chown(f, user.uid, user.gid)
            shutil.copy(key.with_suffix(".pub"), keys / user.name)
            (keys / user.name).chmod(0o644)
        # sshd's privilege separation: made as Debian's ssh service makes it, and left
        # (another test's sshd may run beside these).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        self.hosts = d / "hosts"
        lines = ["127.0.0.1 localhost", f"127.0.0.1 {host}"]
        lines += [f"127.0.0.{FIRST_ADDRESS + i} node{i + 1}" for i in range(16)]
        self.hosts.write_text("\n".join(lines) + "\n")
        self.hosts.chmod(0o644)

    def _holder(self, name: str, addr: str) -> Node:
        script = (
            f"hostname {name} && mount --bind {self.hosts} /etc/hosts && echo ready && "
            "exec sleep 1000000"
        )
        holder = subprocess.Popen(
            ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=subprocess.PIPE,
        )
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"ready", f"{name}: no namespace"
        (self.base / "agents" / name).mkdir(mode=0o755)
        return Node(name, addr, holder)

    # ----- each node's daemons ------------------------------------------------------------

    def start_agent(self, node: Node) -> None:
        sock = self.base / "agents" / node.name / "agent.sock"
        log = open(self.base / f"agent-{node.name}.log", "ab")  # noqa: SIM115 - the daemon's
        assert self.slurm is not None  # the agent asks it whose a job is
        node.agent = subprocess.Popen(
            [*node.enter, *self.agent_prefix, *CLI, "agent", "--socket", str(sock)],
            stdout=log,
            stderr=log,
            env=self.slurm.env,
        )
        self._until(lambda: sock.exists(), f"{node.name}'s agent made no socket", node.agent)

    def start_sshd(self, node: Node) -> None:
        if not node.ssh_port:
            node.ssh_port = _free_port(node.addr)
        config = self.base / f"sshd-{node.name}.conf"
        config.write_text(
            f"Port {node.ssh_port}\nListenAddress {node.addr}\nHostKey {self.base / 'host_key'}\n"
            f"PidFile {self.base / f'sshd-{node.name}.pid'}\n"
            f"AuthorizedKeysFile {self.base / 'authorized_keys'}/%u\n"
            f"AllowUsers {' '.join(u.name for u in self.users)}\nPermitRootLogin no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\n"
        )
        log = open(self.base / f"sshd-{node.name}.log", "ab")  # noqa: SIM115 - the daemon's
        node.sshd = subprocess.Popen(
            [*node.enter, str(SSHD), "-D", "-e", "-f", str(config)], stderr=log
        )

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex((node.addr, node.ssh_port)) == 0

        self._until(listening, f"{node.name}'s sshd never listened", node.sshd)

    def stop_sshd(self, node: Node) -> None:
        """The node's sshd gone, its sessions too: the node unreachable until started again."""
        end(node.sshd, 10)
        node.sshd = None
        # sshd's per-connection children (the bridges' sessions) outlive a TERM'd listener:
        # those of this node's address alone.
        for user in self.users:
            for pid in _sessions_of(user.name):
                if _listens_on(pid, node.addr):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)

    def home(self, user: Any) -> Path:
        return self.base / f"home-{user.name}"

    def _client_config(self) -> None:
        """Each user's ssh config naming the nodes: on the login node (ADAPTYST_TOP_SSH's
        -F), and as ~/.ssh/config, the home every node shares, where a relay's ssh on a
        node finds it."""
        for user in self.users:
            config = self.home(user) / "ssh_config"
            config.write_text(
                "".join(
                    f"Host {n.name}\n  HostName {n.addr}\n  Port {n.ssh_port}\n" for n in self.nodes
                )
                + f"Host *\n  IdentityFile {self.home(user) / 'key'}\n"
                "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                "  LogLevel ERROR\n  ConnectTimeout 5\n"
            )
            os.chown(config, user.uid, user.gid)
            dot = self.home(user) / ".ssh"
            dot.mkdir(mode=0o700)
            shutil.copy(config, dot / "config")
            (dot / "config").chmod(0o600)
            for f in (dot, dot / "config"):
                os.chown(f, user.uid, user.gid)
            subprocess.run(["usermod", "-d", str(self.home(user)), user.name], check=True)

    def login_env(self, user: Any) -> dict[str, str]:
        """USER's environment on the login node: ssh's config naming the nodes,
        adaptyst-top's path there, this Slurm's config."""
        assert self.slurm is not None
        return {
            "ADAPTYST_TOP_SSH": f"ssh -F {self.home(user) / 'ssh_config'}",
            "ADAPTYST_TOP_REMOTE": str(self.launcher),
            "SLURM_CONF": str(self.slurm.conf),
            "HOME": str(self.home(user)),
        }

    def _until(self, ok: object, why: str, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ok():  # type: ignore[operator]
            assert proc.poll() is None, f"{why}: it exited\n{self.logs()}"
            assert time.monotonic() < deadline, f"{why}\n{self.logs()}"
            time.sleep(0.05)

    def logs(self) -> str:
        return "\n".join(
            f"== {p.name}\n{p.read_text(errors='replace')[-1500:]}"
            for p in sorted(self.base.glob("*.log"))
        )

    def stop(self) -> None:
        if self.slurm is not None:
            self.slurm.stop()
        for node in self.nodes:
            end(node.sshd)
            end(node.agent)
            node.holder.kill()
            node.holder.wait()
        for user in self.users:
            with contextlib.suppress(OSError):
                subprocess.run(["pkill", "-u", user.name], check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _sessions_of(name: str) -> list[int]:
    """sshd's processes serving NAME's sessions (titled `sshd: NAME...`)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "cmdline").read_bytes().startswith(f"sshd: {name}".encode()):
                found.append(int(d.name))
        except OSError:
            continue
    return found


def _listens_on(pid: int, addr: str) -> bool:
    """Whether PID's TCP connections are on ADDR (an sshd session of that node's)."""
    try:
        inodes = {
            os.readlink(f"/proc/{pid}/fd/{fd}")[len("socket:[") : -1]
            for fd in os.listdir(f"/proc/{pid}/fd")
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")
        }
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    want = "".join(f"{int(part):02X}" for part in reversed(addr.split(".")))
    return any(line.split()[1].startswith(want) and line.split()[9] in inodes for line in table)
