"""A real Slurm for the tests, from Debian's packages (slurmctld, slurmd, munge,
slurm-client): its own munge key and socket, its own config, state and ports, every
daemon in the foreground as a child of the test, stopped at the end. Nothing under
/etc is used or changed: the commands find it through $SLURM_CONF. One node (this
machine), or several (tests/support/nodes.py: each a namespace with its own hostname,
address and slurmd)."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.installed import end

START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory_mb() -> int:
    """This machine's memory in MB, as slurmd counts it (a little under /proc's total)."""
    total_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return max(1, total_kb // 1024 - 256)


@dataclass(frozen=True)
class SlurmNode:
    """A node of its own on this machine: its name and loopback address, and the command
    prefix that runs a program inside it (nsenter into its namespaces)."""

    name: str
    addr: str
    enter: tuple[str, ...]


class Slurm:
    def __init__(self, nodes: Sequence[SlurmNode] = ()) -> None:
        self.nodes = list(nodes)
        self.base = Path(tempfile.mkdtemp(prefix="adt-slurm-"))
        self.base.chmod(0o755)  # users' commands read the config and munge's socket
        self.conf = self.base / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.log = self.base / "log"
        self.log.mkdir()
        try:
            self._munge()
            self._config()
            self._daemon(["slurmctld", "-D", "-i"], "slurmctld")
            if not self.nodes:
                self._daemon(["slurmd", "-D"], "slurmd")
            for node in self.nodes:  # its hostname (its namespace's) names it to slurmd
                self._daemon([*node.enter, "slurmd", "-D"], f"slurmd-{node.name}")
            self._wait_idle()
        except BaseException:
            self.stop()
            raise

    def _munge(self) -> None:
        munge = pwd.getpwnam("munge")
        key_dir, self.run_dir = self.base / "munge-key", self.base / "munge-run"
        for d, mode in ((key_dir, 0o700), (self.run_dir, 0o755)):
            d.mkdir()
            os.chown(d, munge.pw_uid, munge.pw_gid)
            d.chmod(mode)
        key = key_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chown(key, munge.pw_uid, munge.pw_gid)
        key.chmod(0o400)
        self.munge_socket = self.run_dir / "munge.sock"
        argv = [
            "munged",
            "-F",
            f"--key-file={key}",
            f"--socket={self.munge_socket}",
            f"--pid-file={self.run_dir / 'munged.pid'}",
            f"--log-file={self.run_dir / 'munged.log'}",
            f"--seed-file={self.run_dir / 'seed'}",
        ]
        out = open(self.log / "munged.out", "wb")  # noqa: SIM115 - the daemon holds it
        self.procs.append(
            subprocess.Popen(argv, user=munge.pw_uid, group=munge.pw_gid, stdout=out, stderr=out)
        )
        self._until(self.munge_socket.exists, "munged made no socket")

    def _config(self) -> None:
        host = socket.gethostname().split(".")[0]
        for d in ("state", "spool"):
            (self.base / d).mkdir()
        for node in self.nodes:
            (self.base / "spool" / node.name).mkdir()
        if self.nodes:
            # Two CPUs a node whatever this machine has (a node may not claim more than it
            # finds), and room for two ranks each.
            lines = [
                f"NodeName={n.name} NodeAddr={n.addr} Port={_free_port()} CPUs=2 "
                "RealMemory=512 State=UNKNOWN"
                for n in self.nodes
            ]
            names = ",".join(n.name for n in self.nodes)
            spool, pid_file = self.base / "spool" / "%n", self.base / "slurmd-%n.pid"
            controller = f"{host}(127.0.0.1)"
        else:
            # Its memory declared (Slurm's default is 1 MB, which it gives jobs as their
            # RSS limit: Dask's workers then stop at once).
            lines = [
                f"NodeName={host} CPUs={os.cpu_count() or 1} RealMemory={_memory_mb()} "
                "State=UNKNOWN"
            ]
            names = host
            spool, pid_file = self.base / "spool", self.base / "slurmd.pid"
            controller = host
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=adtest",
                    f"SlurmctldHost={controller}",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "CredType=cred/munge",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    f"StateSaveLocation={self.base / 'state'}",
                    f"SlurmdSpoolDir={spool}",
                    f"SlurmctldPidFile={self.base / 'slurmctld.pid'}",
                    f"SlurmdPidFile={pid_file}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "SelectType=select/cons_tres",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    f"SlurmctldLogFile={self.log / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.log / 'slurmd-%n.log'}",
                    *lines,
                    f"PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        self.conf.chmod(0o644)

    def _daemon(self, argv: list[str], name: str) -> None:
        out = open(self.log / f"{name}.out", "wb")  # noqa: SIM115 - the daemon holds it
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=out, stderr=out))

    def _until(self, ok: object, why: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ok():  # type: ignore[operator]
            for p in self.procs:
                assert p.poll() is None, f"{p.args!r} exited: {why}\n{self.logs()}"
            assert time.monotonic() < deadline, f"{why}\n{self.logs()}"
            time.sleep(0.1)

    def _wait_idle(self) -> None:
        def idle() -> bool:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True
            )
            return out.stdout.strip() == "idle"

        self._until(idle, "the node never became idle")

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text()[-2000:]}" for p in self.log.iterdir())

    def sbatch(self, uid: int, gid: int, script: Path, *options: str) -> str:
        """Submit SCRIPT as the user; the job's ID."""
        done = subprocess.run(
            ["sbatch", "--output=/dev/null", *options, str(script)],
            env=self.env,
            user=uid,
            group=gid,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            text=True,
            timeout=30,
        )
        m = re.search(r"Submitted batch job (\d+)", done.stdout)
        assert m, done.stdout + done.stderr
        return m.group(1)

    def state(self, job: str) -> str:
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", job], env=self.env, capture_output=True, text=True
        )
        m = re.search(r"JobState=(\S+)", out.stdout)
        return m.group(1) if m else "?"

    def stop(self) -> None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["scancel", "--full", "--state=RUNNING"], env=self.env, timeout=10)
        for p in reversed(self.procs):
            end(p)
        shutil.rmtree(self.base, ignore_errors=True)
