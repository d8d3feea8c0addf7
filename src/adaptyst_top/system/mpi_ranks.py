"""A process's MPI rank, as its own environment names it.

Every MPI launcher tells each rank its number in its environment before the program
starts: Open MPI's `OMPI_COMM_WORLD_RANK`, MPICH's and Intel MPI's `PMI_RANK`, PMIx's
`PMIX_RANK`, and Slurm's `SLURM_PROCID` for a task srun starts. A launcher's own number
comes first: inside a batch job, `mpiexec` starts its ranks from the batch step, whose
`SLURM_PROCID` (0) every rank inherits. And `SLURM_PROCID` is a rank only in a step's
task (`SLURM_STEP_ID` beside it): the batch step's script, and the `srun` it runs, carry
a `SLURM_PROCID` of 0 too, and are no rank.

The environment is read by the user's own process (the kernel lets a user read only their
own processes' environments), never by root's agent: what a job's processes carry there
is theirs. A rank is a hint for the view, not a permission: nothing is decided by it.
"""

from __future__ import annotations

from pathlib import Path

from adaptyst_top.system.proc_exec import read_proc

RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
MAX_RANK = 1 << 24  # no MPI job is larger; past it, the value is not a rank
_WANTED = tuple(name.encode() + b"=" for name in RANK_VARIABLES)
_SLURM_PROCID = b"SLURM_PROCID="
_IN_A_STEP = (b"SLURM_STEP_ID=", b"SLURM_STEPID=")  # what srun tells a step's tasks


def rank_in(environ: bytes) -> int | None:
    """The rank ENVIRON (NUL-separated NAME=VALUE) names, by RANK_VARIABLES' order; None
    where none names a whole number in 0..MAX_RANK."""
    found: dict[bytes, bytes] = {}
    in_a_step = False
    for entry in environ.split(b"\0"):
        in_a_step = in_a_step or entry.startswith(_IN_A_STEP)
        for prefix in _WANTED:
            if entry.startswith(prefix):
                found.setdefault(prefix, entry[len(prefix) :])
    if not in_a_step:
        found.pop(_SLURM_PROCID, None)  # the batch step's, or srun's own: no rank
    for prefix in _WANTED:
        value = found.get(prefix, b"")
        if value.isdigit() and len(value) <= 8 and int(value) < MAX_RANK:
            return int(value)
    return None


def start_time(pid: int, proc: Path = Path("/proc")) -> int | None:
    """PID's start time in clock ticks (field 22 of its stat): with the pid, one process
    for its whole life. None when it is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_bytes()
        return int(stat.rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class RankNames:
    """Processes' ranks, each read once in its life (a process's environment at its start
    is what it keeps in /proc), and kept past its end: a job's last snapshot comes after
    its ranks have exited."""

    MAX_KEPT = 65536

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = proc
        self._known: dict[tuple[int, int], int | None] = {}
        self._last: dict[int, int | None] = {}  # pid -> the rank its last process had

    def rank_of(self, pid: int) -> int | None:
        """PID's rank; None where it names none, is not this user's to read, or was
        never read before it ended."""
        started = start_time(pid, self.proc)
        if started is None:
            return self._last.get(pid)
        key = (pid, started)
        if key not in self._known:
            if len(self._known) >= self.MAX_KEPT:
                self._known.clear()
                self._last.clear()
            try:
                self._known[key] = rank_in(read_proc(pid, "environ", self.proc))
            except OSError:
                self._known[key] = None
            self._last[pid] = self._known[key]
        return self._known[key]
