"""Each Slurm job's share of the node's device energy, for the agent's metrics.

Between two readings, a CPU's energy is split by CPU time: a job gets the share of the
node's busy CPU time its processes used (method `cpu-time`); what no job used (the
system, other users, processes that exited between readings) stays `unattributed`.
An NVIDIA GPU's energy is split by its processes' SM utilisation
(collectors/energy/gpu_split.py, method `nvml-process-util`): a job gets what its
processes were charged, the device's idle draw goes to `idle`, never to a job, and
processes of no job to `unattributed`. A device no method covers (a GPU under MIG,
AMD, FPGA) is unattributed whole (method `none`). The shares never add up to more than
the device measured: each reading's energy is split once, whole.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from adaptyst_top.collectors.energy.busy import system_busy_ns
from adaptyst_top.collectors.energy.gpu_split import METHODS as SPLIT_METHODS
from adaptyst_top.snapshot import DeviceReading
from adaptyst_top.system.slurm_jobs import job_of
from adaptyst_top.system.targets import process_stat

UNATTRIBUTED = "unattributed"
IDLE = "idle"  # a GPU's idle draw: reported apart, never charged to a job


def _cpu_ns(pid: int, proc: Path) -> tuple[tuple[int, str], int] | None:
    """((start, program), user+system ns) of a process. A PID reused starts later; an
    exec (a Slurm daemon's fork becoming the job's task) changes the program, not the
    start, and may bring the job's environment."""
    st = process_stat(pid, proc)
    return None if st is None else ((st.start, st.comm), st.cpu_ns)


class JobEnergy:
    def __init__(
        self, proc: Path = Path("/proc"), busy_ns: Callable[[], int] = system_busy_ns
    ) -> None:
        self.proc = proc
        self.busy_ns = busy_ns
        # (job, device id, method) -> joules since the agent started
        self.totals: dict[tuple[str, str, str], float] = {}
        self._energy: dict[str, float] = {}  # device id -> its last energy reading
        # pid -> (start, program), ns, job
        self._cpu: dict[int, tuple[tuple[int, str], int, str | None]] = {}
        self._busy: int | None = None
        self._gpu_seen: dict[tuple[str, int | str], float] = {}  # (device, pid|IDLE) -> J
        self._split_mode: dict[str, bool] = {}  # device -> its last reading was split

    def update(self, devices: Sequence[DeviceReading]) -> None:
        job_cpu = self._job_cpu_deltas()
        busy = self.busy_ns()
        busy_delta = None if self._busy is None else busy - self._busy
        self._busy = busy
        for d in devices:
            if d.energy_j is None or d.kind == "opencl":  # an OpenCL view is its device's
                continue
            if d.kind == "gpu" and d.extra.get("process_energy") in SPLIT_METHODS:
                # First in this mode (a GPU's split starts at its second process read):
                # what came before was booked whole as `none`.
                self._gpu_processes(d, first=self._split_mode.get(d.id) is not True)
                self._split_mode[d.id] = True
                self._energy[d.id] = d.energy_j
                continue
            self._split_mode[d.id] = False
            last, self._energy[d.id] = self._energy.get(d.id), d.energy_j
            spent = 0.0 if last is None else d.energy_j - last
            if spent <= 0:
                continue  # first reading, or a counter that restarted: nothing to split
            if d.kind == "cpu" and busy_delta:
                used = sum(job_cpu.values())
                whole = max(busy_delta, used)  # never more than all of it
                for job, ns in job_cpu.items():
                    self._add(job, d.id, "cpu-time", spent * ns / whole)
                self._add(UNATTRIBUTED, d.id, "cpu-time", spent * (1 - used / whole))
            else:
                self._add(UNATTRIBUTED, d.id, "none", spent)

    def _gpu_processes(self, d: DeviceReading, first: bool) -> None:
        """The joules each process was charged since the last reading, to its job."""
        procs = d.extra.get("processes")
        method = str(d.extra["process_energy"])
        now: dict[int | str, float] = {
            IDLE: float(d.extra.get("idle_j") or 0.0),
            UNATTRIBUTED: float(d.extra.get("exited_j") or 0.0),
        }
        for p in procs if isinstance(procs, list) else []:
            if isinstance(p, dict) and isinstance(p.get("energy_j"), (int, float)):
                now[int(p["pid"])] = float(p["energy_j"])
        for who, joules in now.items():
            before = self._gpu_seen.get((d.id, who))
            self._gpu_seen[(d.id, who)] = joules
            if first or joules <= (before or 0.0):
                continue  # what was charged before this agent's first reading stays out
            if isinstance(who, str):  # the idle draw; processes gone before a read
                job = who
            else:
                known = self._cpu.get(int(who))
                job = (known[2] if known else job_of(int(who), self.proc)) or UNATTRIBUTED
            self._add(job, d.id, method, joules - (before or 0.0))
        for key in [k for k in self._gpu_seen if k[0] == d.id and k[1] not in now]:
            del self._gpu_seen[key]

    def _add(self, job: str, device: str, method: str, joules: float) -> None:
        key = (job, device, method)
        self.totals[key] = self.totals.get(key, 0.0) + joules

    def _job_cpu_deltas(self) -> dict[str, int]:
        """CPU ns each job's processes used since the last call."""
        out: dict[str, int] = {}
        now: dict[int, tuple[tuple[int, str], int, str | None]] = {}
        for entry in os.scandir(self.proc):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            got = _cpu_ns(pid, self.proc)
            if got is None:
                continue
            ident, ns = got
            before = self._cpu.get(pid)
            if before is not None and before[0][0] == ident[0]:  # the same process
                job = before[2]
                if job is not None and ns > before[1]:
                    out[job] = out.get(job, 0) + ns - before[1]
                if before[0][1] != ident[1]:  # it runs another program: asked again
                    job = job_of(pid, self.proc)
            else:
                job = job_of(pid, self.proc)  # a new process: its environment once
            now[pid] = (ident, ns, job)
        self._cpu = now
        return out


__all__ = ["IDLE", "UNATTRIBUTED", "JobEnergy"]
