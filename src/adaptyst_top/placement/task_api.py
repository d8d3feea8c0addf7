"""The task API for applications.

    from adaptyst_top.placement.task_api import task, device_for

    dev = device_for("spmv", size=n, candidates=["cpu", "opencl:0"])
    with task("spmv", device=dev, size=n, feature=density):
        run_spmv_on(dev, ...)

`task` fires the USDT probes adaptyst:task_begin/task_end (a nop when nothing is
attached). Their first argument is a key "task|device|size bucket|feature bucket"
so that the monitor keeps per-task, per-device, per-size statistics in the kernel.
`device_for` never blocks: it returns the assignment last pushed by a monitor over
the control channel, or the default (the first candidate) when none runs. Its
`kernels` (globs over the device kernels the task launches, as `cuda:`/`opencl:` rows
name them) let a monitor that probes those kernels time the task's runs on an
accelerator on the device's own clock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from adaptyst_top.placement import _sdt  # type: ignore[attr-defined]
from adaptyst_top.placement.control import ControlClient
from adaptyst_top.placement.protocol import MAX_GLOBS, kernel_glob_ok

# Re-exported: the key functions are part of the task API's names.
from adaptyst_top.placement.task_keys import feature_bucket as feature_bucket
from adaptyst_top.placement.task_keys import parse_key as parse_key
from adaptyst_top.placement.task_keys import size_bucket as size_bucket
from adaptyst_top.placement.task_keys import task_key as task_key

PROBE_BINARY = Path(_sdt.__file__).resolve()
# adaptyst_task.h (C, C++) and adaptyst_task.f90 (Fortran): the same probes and keys.
INCLUDE_DIR = Path(__file__).resolve().parent / "include"
HAS_SDT = bool(_sdt.HAS_SDT)
TASK_SPEC = f"usdt:{PROBE_BINARY}:adaptyst:task_begin..task_end@arg1"


@contextmanager
def task(name: str, device: str, size: int, feature: float | None = None) -> Iterator[str]:
    key = task_key(name, device, size, feature)
    milli = -1 if feature is None else int(feature * 1000)
    _sdt.task_begin(key, name, device, int(size), milli)
    try:
        yield key
    finally:
        _sdt.task_end(key, int(size))


class _Assignments:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_task: dict[str, str] = {}
        self.trial: dict[str, tuple[str, int]] = {}  # task -> (device, runs left)
        self.client: ControlClient | None = None
        self.tasks: set[str] = set()
        self.kernels: dict[str, list[str]] = {}

    def set(self, task_name: str, device: str, runs: int | None = None) -> None:
        with self.lock:
            if runs:
                self.trial[task_name] = (device, runs)  # a few runs there, then back
            else:
                self.by_task[task_name] = device
                self.trial.pop(task_name, None)

    def current(self, task_name: str) -> str | None:
        with self.lock:
            trial = self.trial.get(task_name)
            if trial is not None:
                device, left = trial
                if left <= 1:
                    del self.trial[task_name]
                else:
                    self.trial[task_name] = (device, left - 1)
                return device
            return self.by_task.get(task_name)

    def ensure_client(self, task_name: str, kernels: Sequence[str] = ()) -> None:
        if task_name in self.tasks and not kernels:
            return
        marks = sorted(set(kernels))
        if task_name in self.tasks and self.kernels.get(task_name) == marks:
            return
        self.tasks.add(task_name)
        if marks:
            self.kernels[task_name] = marks
        if self.client is None:
            self.client = ControlClient(sorted(self.tasks), self.set, kernels=dict(self.kernels))
        else:
            self.client.set_tasks(sorted(self.tasks), dict(self.kernels))


_assignments = _Assignments()


def device_for(name: str, size: int, candidates: Sequence[str], kernels: Sequence[str] = ()) -> str:
    """The device the monitor assigned to this task, if it is a candidate; else the
    first. KERNELS: globs over the device kernels the task launches (at most 8)."""
    if not candidates:
        raise ValueError("device_for needs at least one candidate device")
    if isinstance(kernels, str):
        kernels = (kernels,)
    if len(kernels) > MAX_GLOBS or not all(kernel_glob_ok(k) for k in kernels):
        raise ValueError(f"kernels: at most {MAX_GLOBS} globs of A-Z a-z 0-9 _ * ? [ ] ! . ~ -")
    _assignments.ensure_client(name, kernels)
    chosen = _assignments.current(name)
    return chosen if chosen is not None and chosen in candidates else candidates[0]


def assign(name: str, device: str, runs: int | None = None) -> None:
    """Set an assignment in-process (what the control channel does; also for tests)."""
    _assignments.set(name, device, runs)
