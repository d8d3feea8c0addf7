"""A task-API application whose costs per device are set, not measured: in even phases a
small input that the CPU runs 6x faster, in odd phases a large one that "opencl:0" runs
6x faster. The end-to-end test of the advisor runs it, so that the move it must see
does not hang on how fast PoCL happens to be on a shared VM this minute.

    python timed_tasks.py PHASE_S DURATION_S
"""

from __future__ import annotations

import sys
import time

from adaptyst_top.placement.task_api import device_for, task

FAST, SLOW = 0.002, 0.012  # seconds per run
PHASES = (  # (input size, seconds per run on each device)
    (1_000, {"cpu": FAST, "opencl:0": SLOW}),
    (100_000, {"cpu": SLOW, "opencl:0": FAST}),
)


def main() -> int:
    phase_s, duration = float(sys.argv[1]), float(sys.argv[2])
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < duration:
        size, cost = PHASES[int(elapsed // phase_s) % len(PHASES)]
        dev = device_for("work", size=size, candidates=list(cost))
        with task("work", device=dev, size=size, feature=0.5):
            time.sleep(cost[dev])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
