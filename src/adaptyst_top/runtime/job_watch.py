"""A Slurm job's future: its processes that appear after the start join the probes.

Children of the job's processes are followed by the engine as they fork; this finds the
rest (a new step's tasks, started by slurmstepd) by looking again every PERIOD_S.
"""

from __future__ import annotations

import threading

from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.collectors.profile.profiler import Profiler
from adaptyst_top.system.slurm_jobs import JobScan

PERIOD_S = 0.5


class JobWatch:
    def __init__(
        self,
        scan: JobScan,
        engine: ProbeEngine,
        period: float = PERIOD_S,
        profiler: Profiler | None = None,
    ) -> None:
        self.scan = scan
        self.engine = engine
        self.profiler = profiler  # --profile: the job's new processes are sampled too
        self.period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period) and not self.engine.target_ended:
            for pid in self.scan.new_processes():
                self.engine.follow(pid)  # asks the engine's admit rule first
                if self.profiler is not None:
                    self.profiler.add(pid)  # False (a full map): the profile misses it

    def close(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)
