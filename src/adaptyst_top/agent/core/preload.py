"""What a first session loads, loaded as the agent starts: the entry decoder (capstone),
the profiler, calibration and the device collectors, with the OpenCL platforms' own
libraries (the ICD loader, PoCL). Loaded by a session, they stayed for the agent's life
all the same, so its memory after every session had closed sat 13 MiB above its idle
figure; loaded here, the idle figure is what serving takes, and a first probe waits for
none of it (bench/bench_agent_memory.py). The probes' calibration, once a boot, starts
here too, not beside the first users' first probes."""

from __future__ import annotations

from adaptyst_top.collectors.probes.calibration import BackgroundCalibration


def preload() -> BackgroundCalibration:
    """The imports done and the calibration started (close() it as the agent stops)."""
    from adaptyst_top.collectors.devices.sweep import DeviceSweep
    from adaptyst_top.collectors.probes.entry_safety import disassembler
    from adaptyst_top.collectors.probes.overhead import CostTable
    from adaptyst_top.collectors.profile import profiler  # noqa: F401 - loaded, not used

    calibration = BackgroundCalibration(CostTable())
    try:
        disassembler()
        sweep = DeviceSweep(pid=None)
        try:
            sweep.read()  # waits for the OpenCL list: its libraries are in by the first session
        finally:
            sweep.close()
    except BaseException:
        calibration.close()
        raise
    return calibration
