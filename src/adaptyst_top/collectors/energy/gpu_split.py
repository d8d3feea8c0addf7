"""A GPU's energy split over its processes by NVML's per-process utilisation.

Between two reads of the process list, the device's energy is split by each process's
mean SM utilisation over that window (`nvmlDeviceGetProcessUtilization`'s samples):
a process gets `energy × its share / max(1, the shares together)`. What no process was
busy for is the device's idle draw, kept apart (`idle_j`) and never charged to a process
or a job. An idle window (NVML_ERROR_NOT_FOUND: no sample) charges it all to idle. Under
MIG NVML gives no per-process utilisation: nothing is split, and the reading says so.
Method name in the snapshot contract: `nvml-process-util`.
"""

from __future__ import annotations

from collections.abc import Mapping

METHOD = "nvml-process-util"
AMD_METHOD = "amdsmi-process-gfx"  # AMD: each process's GFX engine time (amd_gpu.py)
METHODS = (METHOD, AMD_METHOD)  # a reading's extra.process_energy when split
PROCESS_EVERY_S = 5.0  # process lists change slowly; reading them costs the driver
GONE = -1  # the processes that exited within the window, together (never a PID)


class ProcessEnergySplit:
    def __init__(self) -> None:
        self.by_pid: dict[int, float] = {}  # joules charged to each process listed
        self.idle_j = 0.0
        self.measured_j = 0.0  # the device's energy over the windows split
        self._last_j: float | None = None

    def charge(self, energy_j: float | None, utils: Mapping[int, float]) -> None:
        """The device's energy now (since start), and each listed process's mean SM
        utilisation (0..1) since the last call. A process no longer listed is dropped
        (a PID used again later starts at 0)."""
        if energy_j is None:
            return
        last, self._last_j = self._last_j, energy_j
        for gone in set(self.by_pid) - set(utils) - {GONE}:
            del self.by_pid[gone]
        if last is None or energy_j <= last:
            return
        spent = energy_j - last
        busy = sum(min(1.0, max(0.0, u)) for u in utils.values())
        scale = spent / max(1.0, busy)
        charged = 0.0
        for pid, u in utils.items():
            joules = min(1.0, max(0.0, u)) * scale
            self.by_pid[pid] = self.by_pid.get(pid, 0.0) + joules
            charged += joules
        self.idle_j += spent - charged
        self.measured_j += spent
