"""Measure what each attach-point class costs on this machine, with our own handlers.

A small C program (calibrate.c, built once with the system's gcc into the cache)
has functions whose first instruction is known. Each class is measured as the time
per call with the probe minus without it, in the same process, and the median latency
the probe reports for a function that does next to nothing is the part of that cost
that falls inside a measured interval. Results are cached per boot, CPU and method.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from pathlib import Path

from adaptyst_top.collectors.probes.bpf.module_object import KINDS
from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.cost.oncpu import oncpu_offset
from adaptyst_top.collectors.probes.cost.table import CostTable
from adaptyst_top.collectors.probes.helpers.build import (
    HelperBuildError,
    HelperProcess,
    boot_key,
    build_helper,
    helper_source,
    load_result,
    save_result,
)
from adaptyst_top.collectors.probes.kinds import calibration_cases
from adaptyst_top.collectors.probes.model import Row
from adaptyst_top.collectors.probes.safety.entry_safety import EntryPolicy
from adaptyst_top.snapshot.histogram import bucket_bounds, percentile

# (class, calib function, spec suffix, calls), each kind's own cases.
PLAN = tuple((c.cost_class, c.word, c.spec, c.calls) for c in calibration_cases())
# The fastest of several runs, with and without the probe, interleaved: noise from
# the rest of the machine only ever adds time, so the minimum is the figure to keep
# (a median of differences let one busy moment on a 2-core CI machine halve a ratio).
REPEATS = 5


class CalibrationError(RuntimeError):
    pass


def build_calibrator(directory: Path | None = None) -> Path:
    """The calibration binary, compiled once per source version."""
    try:
        return build_helper("calibrate", directory)
    except (HelperBuildError, OSError) as exc:
        raise CalibrationError(str(exc)) from None


METHOD = b"median-2"  # how a class is measured: a cache of another method is not read


def _cpu_model() -> bytes:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", "rb") as f:
        for line in f:
            if line.startswith(b"model name"):
                return line
    return b"?"


def _cache_key() -> str:
    # The programs measured (the objects built with the package), whether the kernel
    # gives them on-CPU reads, the CPU (a migrated VM keeps its boot) and the method.
    programs = str(oncpu_offset()).encode() + METHOD + _cpu_model()
    for obj in sorted(KINDS.glob("*.bpf.o")):
        with contextlib.suppress(OSError):
            programs += obj.read_bytes()
    return boot_key(programs, helper_source("calibrate"))


def load_cached() -> CostTable | None:
    costs = load_result("calibration", _cache_key)
    try:
        table = CostTable({k: ClassCost(**v) for k, v in costs.items()})
    except (TypeError, AttributeError):
        return None  # none, or of another shape: calibrate again
    for c in table.costs.values():
        figures = (c.per_hit_ns, c.in_interval_ns, c.least_in_interval_ns or 0.0)
        if not all(isinstance(f, (int, float)) and 0 <= f < 1e9 for f in figures):
            return None  # a figure no probe costs (NaN, negative, text): measured again
    return table


def save_cached(table: CostTable) -> None:
    costs = {k: vars(v) for k, v in table.costs.items() if v.source == "calibrated"}
    save_result("calibration", _cache_key(), costs)


Plan = tuple[tuple[str, str, str, int], ...]


def calibrate(binary: Path | None = None, plan: Plan = PLAN) -> CostTable:
    """Measure every class of PLAN now (a few seconds: one BPF compile per class)."""
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine

    binary = binary or build_calibrator()
    target = HelperProcess(binary)
    table = CostTable()
    try:
        # Its own target, whose entries are known: no entry check needed.
        with ProbeEngine(pid=target.proc.pid, entry_policy=EntryPolicy.trusting()) as engine:
            groups = {cls: engine.add(spec.format(bin=binary)) for cls, _, spec, _ in plan}
            if not engine.wait(120):
                raise CalibrationError("compiling the calibration probes timed out")
            for g in groups.values():
                if g.state == "error":
                    raise CalibrationError(g.error)
            # Switch everything off, then measure one class at a time.
            for g in groups.values():
                for row in g.rows:
                    engine.set_enabled(row.id, False)
            engine.flush()  # really detached: a gated probe still traps
            for cls, fn, _spec, calls in plan:
                row = groups[cls].rows[0]
                bases, probed_runs, inside, least = [], [], [], []
                for _ in range(REPEATS):
                    bases.append(float(target.ask(f"{fn} {calls}")))
                    engine.set_enabled(row.id, True)
                    engine.flush()
                    engine.read()
                    before = dict(row.hist.get(None, {}))
                    probed_runs.append(float(target.ask(f"{fn} {calls}")))
                    engine.read()
                    engine.set_enabled(row.id, False)
                    engine.flush()
                    if row.spec.measures_latency and (got := _latencies_since(row, before)):
                        inside.append(got[0])
                        least.append(got[1])
                table.costs[cls] = ClassCost(
                    per_hit_ns=round(max(0.0, min(probed_runs) - min(bases)), 1),
                    in_interval_ns=round(min(inside), 1) if inside else 0.0,
                    source="calibrated",
                    least_in_interval_ns=float(min(least)) if least else None,
                )
        table.costs[ov.UNKNOWN] = ClassCost(**{**vars(table.costs[ov.SINGLESTEP])})
    finally:
        target.close()
    return table


def _latencies_since(row: Row, before: dict[int, int]) -> tuple[float, int] | None:
    """The median latency of the calls ROW timed since its histogram was BEFORE, and the
    low edge of the least one's bucket. The median, not the mean: on a busy node a
    preempted call runs long, and the mean of every repeat with it (the single-step
    class read 18.3 us beside two busy loops, 12.9 quiet, while its calls' median and
    minimum did not move). Cached for the boot, such a figure halved every later net
    latency."""
    now = row.hist.get(None, {})
    delta = {b: c - before.get(b, 0) for b, c in now.items() if c > before.get(b, 0)}
    p50 = percentile(delta, 0.5)
    return None if p50 is None else (p50, bucket_bounds(min(delta))[0])


class _Run:
    """One calibration child for every table of this process that asks while it runs:
    on a fresh node, the agent's first users' sessions each started a child of their
    own, all beside their first probes on the same cores."""

    lock = threading.Lock()
    current: _Run | None = None

    def __init__(self) -> None:
        self.tables: list[CostTable] = []
        self.proc: subprocess.Popen[str] | None = None
        self.done = threading.Event()
        self.killed = False  # every table left: a table that comes now starts another
        self.thread = threading.Thread(target=self._run, name="calibration", daemon=True)
        self.thread.start()

    @classmethod
    def join(cls, table: CostTable) -> _Run:
        with cls.lock:
            if cls.current is None or cls.current.killed:
                cls.current = cls()
            cls.current.tables.append(table)
            return cls.current

    def leave(self, table: CostTable) -> None:
        """TABLE's session closed; the child is killed when no table waits on it."""
        with self.lock:
            # By identity: tables are dataclasses, and every fresh one equals the others.
            self.tables = [t for t in self.tables if t is not table]
            self.killed = not self.tables and not self.done.is_set()
        if self.killed and self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def _run(self) -> None:
        import sys

        costs: dict[str, ClassCost] = {}
        error = ""
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "adaptyst_top.collectors.probes.cost.calibration"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            if self.killed:  # every table left while it started
                self.proc.kill()
            out, err = self.proc.communicate(timeout=300)
            if self.proc.returncode == 0:
                costs = {k: ClassCost(**v) for k, v in json.loads(out).items()}
            elif self.proc.returncode > 0:  # < 0: killed by leave(), nothing to say
                error = ((err or out).strip().splitlines() or ["no output"])[-1]
        except (OSError, subprocess.TimeoutExpired) as exc:
            error = f"calibration did not finish: {exc}"
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()  # root's, with probes attached: never left running
                self.proc.communicate()
        with self.lock:
            if _Run.current is self:  # a session from now on finds the cache, or starts again
                _Run.current = None
            for table in self.tables:
                table.costs.update(costs)
                if error:
                    table.error = error
        self.done.set()


class BackgroundCalibration:
    """Calibrates in a child process (its own engine, its own target), so the monitor's
    threads never share state with it and closing the monitor simply kills it (one child
    for all of this process's sessions while it runs, killed when the last closes).
    The shared table holds the default figures until the child answers."""

    def __init__(self, table: CostTable, use_cache: bool = True) -> None:
        self.table = table
        cached = load_cached() if use_cache else None
        self.run: _Run | None = None
        if cached is not None:
            table.costs.update(cached.costs)
            return
        self.run = _Run.join(table)

    def wait(self, timeout: float | None = None) -> None:
        if self.run is not None:
            self.run.done.wait(timeout)

    def close(self) -> None:
        if self.run is not None:
            self.run.leave(self.table)


def main() -> int:
    """Calibrate, save to the cache, print the table as JSON (run as a child process)."""
    import sys

    try:
        table = calibrate()
    except (CalibrationError, HelperBuildError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    try:
        save_cached(table)
    except OSError as exc:  # an unsafe or full cache: measured all the same, just not kept
        print(f"calibration not cached: {exc}", file=sys.stderr)
    print(json.dumps({k: vars(v) for k, v in table.costs.items() if v.source == "calibrated"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
