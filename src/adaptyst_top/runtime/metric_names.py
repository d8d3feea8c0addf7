"""Every metric the agent exports (agent --metrics / --textfile), named once: the
exporter declares them from here, the cluster view queries them from here, and a test
holds the dashboard (dashboards/adaptyst-top.json) to them. Each is the family's name as
prometheus-client is given it; a counter is exposed with `_total`, an info with `_info`,
a histogram's buckets with `_bucket` (the helpers below)."""

from __future__ import annotations

SCRAPE_DURATION = "adaptyst_scrape_duration_seconds"
TIME = "adaptyst_time_seconds"
JOB_ENERGY = "adaptyst_job_energy_joules"  # counter
DEVICE_UTILIZATION = "adaptyst_device_utilization_ratio"
DEVICE_MEMORY_USED = "adaptyst_device_memory_used_bytes"
DEVICE_MEMORY_TOTAL = "adaptyst_device_memory_total_bytes"
DEVICE_POWER = "adaptyst_device_power_watts"
DEVICE_ENERGY = "adaptyst_device_energy_joules"  # counter
DEVICE_TEMPERATURE = "adaptyst_device_temperature_celsius"
TASK_RUNS = "adaptyst_task_runs"  # counter
TASK_RUN_SECONDS = "adaptyst_task_run_seconds"
TASK_RUN_JOULES = "adaptyst_task_run_joules"
TASK_PLACEMENT = "adaptyst_task_placement"  # info
TASK_MOVES = "adaptyst_task_moves"  # counter
PROBE_CALLS = "adaptyst_probe_calls"  # counter
PROBE_LATENCY = "adaptyst_probe_latency_seconds"  # histogram
PROBE_OVERHEAD = "adaptyst_probe_overhead_ratio"
PROBE_ENERGY = "adaptyst_probe_energy_joules"  # counter
PROBE_SERIES_DROPPED = "adaptyst_probe_series_dropped"  # counter

COUNTERS: tuple[str, ...] = (JOB_ENERGY, DEVICE_ENERGY, TASK_RUNS, TASK_MOVES, PROBE_CALLS)
COUNTERS += (PROBE_ENERGY, PROBE_SERIES_DROPPED)
GAUGES: tuple[str, ...] = (SCRAPE_DURATION, TIME, DEVICE_UTILIZATION, DEVICE_MEMORY_USED)
GAUGES += (DEVICE_MEMORY_TOTAL, DEVICE_POWER, DEVICE_TEMPERATURE, TASK_RUN_SECONDS)
GAUGES += (TASK_RUN_JOULES, PROBE_OVERHEAD)


def total(counter: str) -> str:
    return f"{counter}_total"


def info(name: str) -> str:
    return f"{name}_info"


def bucket(histogram: str) -> str:
    return f"{histogram}_bucket"


def exposed() -> frozenset[str]:
    """Every series name a scrape can hold."""
    latency = (bucket(PROBE_LATENCY), f"{PROBE_LATENCY}_sum", f"{PROBE_LATENCY}_count")
    return frozenset((*GAUGES, *map(total, COUNTERS), info(TASK_PLACEMENT), *latency))
