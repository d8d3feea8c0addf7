"""A Slurm job's processes on this node, from what Slurm leaves there.

slurmd starts a job's tasks with SLURM_JOB_ID in their environment, and, with a cgroup
plugin, in a cgroup whose path names the job (`.../job_42/...`): either marks a process
as the job's. Its owner is the controller's word (`scontrol show job`); where Slurm's
commands are absent, the processes' own uid is all there is. Reading another user's
environment needs root: the agent (or root) scans, a user asks it.

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

from adaptyst_top.collectors.proc_exec import read_proc

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
    return JobInfo(job_id, uid, owner, fields.get("JobState"))


def _environ_has(pid: int, needle: bytes, proc: Path) -> bool:
    try:
        data = read_proc(pid, "environ", proc)
    except OSError:
        return False
    return needle in data.split(b"\0")


def _cgroup_has(pid: int, pattern: re.Pattern[str], proc: Path) -> bool:
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return False
    return pattern.search(text) is not None


def _comm(pid: int, proc: Path) -> str:
    try:
        return (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def job_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The Slurm job a process belongs to (SLURM_JOB_ID in its environment), if any."""
    try:
        data = read_proc(pid, "environ", proc)
    except OSError:
        return None
    for item in data.split(b"\0"):
        if item.startswith(b"SLURM_JOB_ID="):
            value = item.split(b"=", 1)[1].decode(errors="replace")
            return value if _JOB_ID.fullmatch(value) else None
    return None


class JobScan:
    """The job's processes on this node, each reported once."""

    def __init__(self, job_id: str, proc: Path = Path("/proc")) -> None:
        self.job_id = check_job_id(job_id)
        self.proc = proc
        self._env = f"SLURM_JOB_ID={self.job_id}".encode()
        self._cgroup = re.compile(rf"/job_{self.job_id}(/|$)", re.MULTILINE)
        self._seen: set[int] = set()

    def new_processes(self) -> list[int]:
        now = {int(e.name) for e in os.scandir(self.proc) if e.name.isdigit()}
        found = []
        for pid in sorted(now - self._seen):
            # A Slurm daemon's fork about to exec a task is asked again next time.
            if _comm(pid, self.proc) in SLURM_DAEMONS:
                now.discard(pid)
            elif _environ_has(pid, self._env, self.proc) or _cgroup_has(
                pid, self._cgroup, self.proc
            ):
                found.append(pid)
        self._seen = now  # PIDs that went may come back as other processes: asked again
        return found


__all__ = [
    "JobError",
    "JobInfo",
    "JobScan",
    "check_job_id",
    "job_info",
    "job_of",
    "parse_scontrol",
]
