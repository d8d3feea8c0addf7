"""What a first session loads, loaded as the agent starts: the entry decoder (capstone),
the profiler, calibration and the device collectors, with the OpenCL platforms' own
libraries (the ICD loader, PoCL). Loaded by a session, they stayed for the agent's life
all the same, so its memory after every session had closed sat 13 MiB above its idle
figure; loaded here, the idle figure is what serving takes, and a first probe waits for
none of it (bench/bench_agent_memory.py)."""

from __future__ import annotations


def preload() -> None:
    from adaptyst_top.collectors.devices.sweep import DeviceSweep
    from adaptyst_top.collectors.probes import calibration  # noqa: F401 - loaded, not used
    from adaptyst_top.collectors.probes.entry_safety import disassembler
    from adaptyst_top.collectors.profile import profiler  # noqa: F401 - loaded, not used

    disassembler()
    sweep = DeviceSweep(pid=None)
    try:
        sweep.read()  # waits for the OpenCL list: its libraries are in by the first session
    finally:
        sweep.close()
