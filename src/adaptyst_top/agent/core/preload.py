"""What a first session loads, loaded as the agent starts: the entry decoder (capstone),
the profiler, calibration and the device collectors, with the OpenCL platforms' own
libraries (the ICD loader, PoCL). Loaded by a session, they stayed for the agent's life
all the same, so its memory after every session had closed sat 13 MiB above its idle
figure; loaded here, the idle figure is what serving takes, and a first probe waits for
none of it (bench/bench_agent_memory.py). The probes' calibration, once a boot, starts
here too, not beside the first users' first probes. The spare workers (an opener, a
parser) start first: a fresh user's first probe waits on them."""

from __future__ import annotations

import sys
import threading

from adaptyst_top.agent.core import kept_workers
from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration


class Preload:
    """The loading and the calibration, on a thread of their own once the agent listens:
    a wedged GPU's driver (nvmlInit has no timeout) or a slow OpenCL platform must not
    keep the agent from serving, nor from telling systemd it is ready."""

    def __init__(self, spares: bool = True) -> None:
        self._spares = spares  # AgentSettings.spare_workers
        self._calibration: BackgroundCalibration | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="agent-preload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        from adaptyst_top.collectors.devices.sweep import DeviceSweep
        from adaptyst_top.collectors.probes.cost.table import CostTable
        from adaptyst_top.collectors.probes.safety.entry_safety import disassembler
        from adaptyst_top.collectors.profile import profiler  # noqa: F401 - loaded, not used

        if self._spares:
            kept_workers.keep_spares()
        try:
            with self._lock:
                if self._closed:
                    return
                self._calibration = BackgroundCalibration(CostTable())
            disassembler()
            sweep = DeviceSweep(pid=None)
            try:
                sweep.read()  # waits for the OpenCL list: its libraries are in for the first session
            finally:
                sweep.close()
        except Exception as exc:  # the sessions load what they need, as before
            print(f"adaptyst-top agent: preload: {exc!r}", file=sys.stderr)

    def close(self) -> None:
        """The calibration child, if it still runs, and the spare workers ended (as the
        agent stops)."""
        kept_workers.end_spares()
        with self._lock:
            self._closed = True
            calibration = self._calibration
        if calibration is not None:
            calibration.close()
