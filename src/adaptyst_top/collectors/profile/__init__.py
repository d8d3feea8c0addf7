"""Sampled profiles: on-CPU samples and off-CPU intervals of the session's threads, each
with a copy of the top of its user stack, unwound here from each binary's own tables.

The defaults live here, where the CLI reads them without loading the profiler."""

DEFAULT_HZ = 99  # perf's and bcc's profile default: off the beat of 100 Hz timers
HZ_RANGE = (1, 999)
