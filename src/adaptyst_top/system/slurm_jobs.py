"""A Slurm job's processes on this node, from what Slurm itself placed there.

A process is a job's when Slurm says so: its cgroup in Slurm's hierarchy names the job
(`/system.slice/slurmstepd.scope/job_42/...`, or `/slurm/uid_U/job_42/...` with cgroup
v1), which no user can join; or, without a cgroup plugin (`proctrack/linuxproc`), one
of its ancestors is the job's step daemon (root's `slurmstepd`, titled
`slurmstepd: [42.batch]`) and it runs as the user of the task that daemon started.
SLURM_JOB_ID in a process's environment is never believed: any user can set it.
The job's owner is the controller's word (`scontrol show job`); where Slurm's commands
are absent, the processes' own uid is all there is.

A job is "present and future": `JobScan.new_processes()` returns the job's processes
not seen before, reading only the processes that appeared since the last call.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from adaptyst_top.system.proc_exec import read_proc

SCONTROL_TIMEOUT_S = 5.0
# slurmstepd (root's) carries the job in its cgroup: it is Slurm, not the job's code.
SLURM_DAEMONS = frozenset({"slurmstepd", "slurmd", "slurmctld"})
_JOB_ID = re.compile(r"[1-9][0-9]{0,9}")


class JobError(ValueError):
    """A job that cannot be targeted; the message is one line for the user."""


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    owner_uid: int | None  # None: Slurm's commands are not here to say
    owner: str | None
    state: str | None  # RUNNING, COMPLETED...
    node_list: str | None = None  # Slurm's hostlist of its nodes ("node[1-3]"), once placed


def check_job_id(text: str) -> str:
    if not _JOB_ID.fullmatch(text.strip()):
        raise JobError(f"--job {text!r}: a Slurm job ID is a number, as squeue shows it")
    return text.strip()


def job_info(job_id: str) -> JobInfo:
    """What the controller says of the job; JobInfo with no owner when Slurm's commands
    are not installed here. JobError when Slurm does not know the job."""
    job_id = check_job_id(job_id)
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return JobInfo(job_id, None, None, None)
    try:
        done = subprocess.run(
            [scontrol, "show", "job", "-o", job_id],
            capture_output=True,
            text=True,
            timeout=SCONTROL_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JobError(f"job {job_id}: scontrol did not answer ({exc})") from None
    if done.returncode != 0:
        if "invalid job id" in done.stderr.lower():
            raise JobError(f"job {job_id} is not known to Slurm")
        # Slurm's commands installed but not configured here: no owner to tell; each
        # process is still asked for on its own.
        return JobInfo(job_id, None, None, None)
    return parse_scontrol(job_id, done.stdout)


def parse_scontrol(job_id: str, text: str) -> JobInfo:
    """`scontrol show job -o`'s line: `... UserId=alice(1001) ... JobState=RUNNING ...`."""
    fields = dict(f.split("=", 1) for f in text.split() if "=" in f)
    owner = uid = None
    if m := re.fullmatch(r"(.*)\((\d+)\)", fields.get("UserId", "")):
        owner, uid = m.group(1), int(m.group(2))
    nodes = fields.get("NodeList")
    placed = nodes if nodes and nodes != "(null)" else None
    return JobInfo(job_id, uid, owner, fields.get("JobState"), placed)


_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
MAX_NODES = 100_000


def is_node_name(text: str) -> bool:
    """TEXT names a node as Slurm spells one (and as ssh cannot take for an option)."""
    return _NODE_NAME.fullmatch(text) is not None


def job_nodes(info: JobInfo) -> list[str]:
    """The names of the nodes the job runs on (`scontrol show hostnames`); [] where
    Slurm has not placed it or cannot say. JobError when scontrol answers nonsense."""
    scontrol = shutil.which("scontrol")
    if info.node_list is None or scontrol is None:
        return []
    try:
        done = subprocess.run(
            [scontrol, "show", "hostnames", info.node_list],
            capture_output=True,
            text=True,
            timeout=SCONTROL_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JobError(f"job {info.job_id}: scontrol did not answer ({exc})") from None
    names = done.stdout.split() if done.returncode == 0 else []
    if len(names) > MAX_NODES or not all(map(is_node_name, names)):
        raise JobError(f"job {info.job_id}: scontrol named its nodes oddly: {info.node_list!r}")
    return names


_SLURM_CGROUP = re.compile(
    r"^(?:0::/system\.slice/slurmstepd\.scope|[0-9]+:[^:\n]*:/slurm/uid_[0-9]+)"
    r"/job_([1-9][0-9]{0,9})(?:/|$)",
    re.MULTILINE,
)
_STEPD_TITLE = re.compile(rb"^slurmstepd: \[([1-9][0-9]{0,9})\.[A-Za-z0-9_]+\]")
MAX_ANCESTORS = 64


def _comm(pid: int, proc: Path) -> str:
    try:
        return (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def _parent(pid: int, proc: Path) -> int:
    try:
        return int((proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _owner(pid: int, proc: Path) -> int:
    try:
        return (proc / str(pid)).stat().st_uid
    except OSError:
        return -1


def _cgroup_job(pid: int, proc: Path) -> str | None:
    try:
        m = _SLURM_CGROUP.search((proc / str(pid) / "cgroup").read_text())
    except OSError:
        return None
    return m.group(1) if m else None


def _uts(name: str, proc: Path) -> int | None:
    try:
        return (proc / name / "ns" / "uts").stat().st_ino
    except OSError:
        return None


def _this_nodes(stepd: int, proc: Path) -> bool:
    """Whether the step daemon STEPD is this node's: in this process's UTS namespace or
    the machine's (init's: the agent's unit gives the agent one of its own,
    ProtectHostname=), as its slurmd is; not where a machine holds several nodes, each a
    namespace of its own (the tests'). Unknown (not ours to look at): this node's."""
    theirs = _uts(str(stepd), proc)
    if theirs is None:
        return True
    ours = {_uts("self", proc), _uts("1", proc)} - {None}
    return not ours or theirs in ours


def _stepd_job(pid: int, proc: Path) -> str | None:
    """The job of the step daemon above PID (root's, naming its job in its title), when
    PID runs as the user of the task that daemon started and the daemon is this node's."""
    below = pid
    here = _parent(pid, proc)
    for _ in range(MAX_ANCESTORS):
        if here <= 1:
            return None
        if _comm(here, proc) == "slurmstepd" and _owner(here, proc) == 0:
            try:
                m = _STEPD_TITLE.match(read_proc(here, "cmdline", proc))
            except OSError:
                return None
            same_user = _owner(pid, proc) == _owner(below, proc)
            return m.group(1).decode() if m and same_user and _this_nodes(here, proc) else None
        below, here = here, _parent(here, proc)
    return None


def job_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The Slurm job a process belongs to, as Slurm placed it (its cgroup, else its step
    daemon among its ancestors); None for none, and for Slurm's own daemons."""
    if _comm(pid, proc) in SLURM_DAEMONS:
        return None  # Slurm, not the job (a daemon's fork is asked again after its exec)
    return _cgroup_job(pid, proc) or _stepd_job(pid, proc)


class JobScan:
    """The job's processes on this node, each reported once."""

    def __init__(self, job_id: str, proc: Path = Path("/proc")) -> None:
        self.job_id = check_job_id(job_id)
        self.proc = proc
        self._seen: set[int] = set()

    def new_processes(self) -> list[int]:
        now = {int(e.name) for e in os.scandir(self.proc) if e.name.isdigit()}
        found = []
        for pid in sorted(now - self._seen):
            # A Slurm daemon's fork about to exec a task is asked again next time.
            if _comm(pid, self.proc) in SLURM_DAEMONS:
                now.discard(pid)
            elif job_of(pid, self.proc) == self.job_id:
                found.append(pid)
        self._seen = now  # PIDs that went may come back as other processes: asked again
        return found


__all__ = [
    "JobError",
    "JobInfo",
    "JobScan",
    "check_job_id",
    "job_info",
    "job_nodes",
    "job_of",
    "parse_scontrol",
]
