"""What every front end does first: launch or find the target, attach the probes, start
calibration, build the hub and the advisor, and join their parts of each snapshot.
Errors come back as one line each."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from adaptyst_top.collectors.devices.sweep import DeviceSweep
from adaptyst_top.collectors.hub import Hub
from adaptyst_top.collectors.probes.calibration import BackgroundCalibration
from adaptyst_top.collectors.probes.confinement import Confinement
from adaptyst_top.collectors.probes.engine import (
    ATTACH_S_PER_POINT,
    ProbeEngine,
    ProbeError,
)
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.model import one_line
from adaptyst_top.collectors.probes.overhead import CostTable
from adaptyst_top.collectors.probes.spec import ProbeSpec, ProbeSpecError
from adaptyst_top.collectors.profile import DEFAULT_HZ as DEFAULT_PROFILE_HZ
from adaptyst_top.collectors.profile.profiler import LocalCounts, Profiler
from adaptyst_top.runtime.agent_client import (
    AgentConnection,
    AgentHub,
    AgentInterrupted,
    AgentRefused,
    AgentUnavailable,
)
from adaptyst_top.runtime.agent_defaults import DEFAULT_SOCKET
from adaptyst_top.runtime.command_env import held_command
from adaptyst_top.runtime.job_watch import JobWatch
from adaptyst_top.runtime.python_control import PythonControl
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.snapshot import CommandState, DeviceReading, Snapshot
from adaptyst_top.system.launcher import HeldCommand, LaunchError
from adaptyst_top.system.slurm_jobs import JobError, JobScan
from adaptyst_top.system.targets import TargetError, check_pid

if TYPE_CHECKING:  # imported when the advisor starts: numpy costs a launch 80 ms
    from adaptyst_top.placement.loop import PlacementLoop


class SessionError(RuntimeError):
    """One line for the user; the CLI exits with `status` (1, or a shell's 126/127)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Session:
    hub: Hub | AgentHub
    engine: ProbeEngine | None = None
    remote: AgentConnection | None = None  # the agent's, when the probes are there
    child: HeldCommand | None = None
    pid: int | None = None
    calibration: BackgroundCalibration | None = None
    options: SessionOptions = field(default_factory=SessionOptions)
    placement: PlacementLoop | None = None
    job_watch: JobWatch | None = None
    profiler: Profiler | None = None  # the hub's, closed with it
    launch_notes: tuple[str, ...] = ()  # what launching the command said, not told yet
    python_control: PythonControl | None = None  # python: probes added while it runs
    _exit_told: bool = False
    _log_told: bool = False

    def start(self) -> None:
        """Release the held command; SessionError (status 126/127) when it cannot run."""
        if self.child is not None:
            try:
                self.child.release(keep=self.options.target.keep_command)
            except LaunchError as exc:
                raise SessionError(str(exc), exc.status) from None

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        """The hub's snapshot, with the advisor's part when it runs, and the launched
        command's state (its exit status once it has one)."""
        if self.profiler is not None and self.child is not None and self.child.poll() is not None:
            self.profiler.drain()  # the command's last events in its last snapshot
        # The advisor reads an interval's median from the histograms' growth.
        snap = self.hub.snapshot(with_hist or self.placement is not None)
        if self.placement is not None:
            part = self.placement.update(snap)
            snap = replace(snap, tasks=part.tasks, advice=part.advice, advisor=part.advisor)
            if not with_hist:  # asked for the advisor's sake only
                snap = replace(snap, probes=tuple(replace(p, hist=None) for p in snap.probes))
        if self.child is None:
            return snap
        self.child.poll()
        told = []
        name = os.path.basename(self.child.argv[0])
        log = self.options.target.command_log  # where the command's output goes, when to a file
        if log and not self._log_told:
            self._log_told = True
            told.append(f"{name}'s output: {log}")
        if self.launch_notes and (not told or self.child.status is not None):
            # A snapshot after the log's (a status line shows a snapshot's last), or the last.
            told, self.launch_notes = told + list(self.launch_notes), ()
        if self.child.status is not None and not self._exit_told:
            self._exit_told = True
            told.append(f"{name} exited with status {self.child.status}")
        command = CommandState(tuple(self.child.argv), self.child.pid, self.child.status, log)
        return replace(snap, command=command, warnings=snap.warnings + tuple(told))

    def ensure_engine(self) -> ProbeEngine:
        """The engine, started on first use (adding a probe from the TUI), built as at start."""
        if self.engine is None:
            if not isinstance(self.hub, Hub):
                raise ProbeError("the probes of this session are the agent's")
            self.engine, self.calibration = new_engine(self.options, self.pid, self.child)
            self.hub.engine = self.engine
        return self.engine

    def start_profile(self, pid: int, hz: int | None = None) -> None:
        """Sample PID from now on (the process list's pick), instead of what was sampled."""
        hz = hz or self.options.probing.profile_hz or DEFAULT_PROFILE_HZ
        if self.remote is not None:
            self.remote.profile(pid, hz)
            if self.pid is None and self.options.target.job is None:
                self.pid = pid  # as the agent took it: the session's target from now on
            return
        if not isinstance(self.hub, Hub):
            raise SessionError("this session's profile is not sampled here")
        check_pid(pid)
        profiler = new_profiler(self.options, [pid], hz, f"profiling PID {pid}")
        self.close_profile()
        self.profiler = self.hub.profiler = profiler
        if self.job_watch is not None:
            self.job_watch.profiler = profiler

    def close_profile(self) -> None:
        """Sample nothing any more."""
        if self.profiler is not None:
            self.profiler.close()
            self.profiler = None
            if isinstance(self.hub, Hub):
                self.hub.profiler = None
            if self.job_watch is not None:
                self.job_watch.profiler = None

    def give_up_waits_at(self, when: float) -> None:
        """No answer of the agent is waited for past WHEN (time.monotonic())."""
        if self.remote is not None:
            self.remote.give_up_at = when

    def end_command(self) -> int | None:
        """End the launched command (unless it is kept); its status as a shell says it."""
        if self.child is None:
            return None
        if self.options.target.keep_command and self.child.released:
            return self.child.poll()
        return self.child.end()

    def close(self) -> None:
        if self.job_watch is not None:
            self.job_watch.close()
        self.end_command()
        if self.placement is not None:
            self.placement.close()
        self.hub.close()
        if self.calibration is not None:
            self.calibration.close()
        if self.engine is not None:
            self.engine.close()
        if self.profiler is not None:  # one started from the process list
            self.profiler.close()
        pinned = self.options.tenant.pinned
        if self.engine is None and pinned is not None and not pinned.handed_over:
            pinned.close()  # an agent's session that never probed: its command's file
        if self.python_control is not None:
            self.python_control.close()


def open_session(opts: SessionOptions) -> Session:
    """Everything attached and the command (if any) still held; call start() to release it.
    With an agent, the probes attach there (and the devices are read there)."""
    if opts.agent is not None or opts.host is not None:
        return open_remote_session(opts)
    specs = _parsed_specs(opts)
    if opts.target.pid is not None:
        try:
            check_pid(opts.target.pid)
        except TargetError as exc:
            raise SessionError(str(exc)) from None
    scan, job_pids = _job_processes(opts) if opts.target.job is not None else (None, [])
    child, launch_notes, python_control = _held_command(opts, specs)
    pid = child.pid if child else opts.target.pid
    engine = None
    calibration = None
    try:
        if specs or scan is not None:  # a job's engine starts now: its processes come on
            engine, calibration = new_engine(opts, pid, child, job_pids)
            groups = [engine.add(s) for s in specs]
            start = time.monotonic()
            while not engine.wait(0.1):
                if opts.cancel.is_set():
                    raise SessionError("interrupted while attaching: the command never ran")
                points = sum(g.planned for g in groups)
                limit = opts.probing.attach_timeout + ATTACH_S_PER_POINT * points
                if time.monotonic() - start > limit:
                    raise SessionError(
                        f"probes not attached after {limit:.0f}s ({points} attach points)"
                    )
            if opts.cancel.is_set():
                raise SessionError("interrupted while attaching: the command never ran")
            errors = list(dict.fromkeys(g.error for g in groups if g.state == "error"))
            if errors:  # each reason once (two specs on a target that exited: one line)
                raise SessionError("; ".join(errors))
        profiler = _profiler(opts, pid, job_pids)
    except (ProbeError, SessionError) as exc:
        if calibration is not None:
            calibration.close()
        if engine is not None:
            engine.close()
        if child is not None:
            child.end()
        if python_control is not None:
            python_control.close()
        raise SessionError(str(exc)) from None
    sweep = DeviceSweep(pid=pid, power_model=opts.probing.power_model)
    hub = Hub(engine, sweep, profiler)
    placement = start_placement(opts, sweep.read()) if opts.advisor.objective else None
    job_watch = (
        JobWatch(scan, engine, profiler=profiler)
        if scan is not None and engine is not None
        else None
    )
    return Session(
        job_watch=job_watch,
        profiler=profiler,
        hub=hub,
        engine=engine,
        child=child,
        launch_notes=launch_notes,
        python_control=python_control,
        pid=pid,
        calibration=calibration,
        options=opts,
        placement=placement,
    )


def new_engine(
    opts: SessionOptions,
    pid: int | None,
    child: HeldCommand | None,
    job_pids: Sequence[int] = (),
) -> tuple[ProbeEngine, BackgroundCalibration]:
    """The one place an engine is made: every option applies wherever it is started."""
    costs = CostTable()
    engine = ProbeEngine(
        pid=pid,
        scope=job_pids if opts.target.job is not None else None,
        follow=opts.target.follow,
        admit=opts.tenant.admit,
        scope_name=f"job {opts.target.job}" if opts.target.job is not None else None,
        command_path=child.path if child else opts.target.command_path,
        max_attach=opts.probing.max_probes,
        owner=opts.tenant.owner,
        account=opts.tenant.account,
        confine_uid=opts.tenant.confine_uid,
        pinned=opts.tenant.pinned,
        costs=costs,
        budget=opts.probing.budget,
        enforce_budget=opts.probing.enforce_budget,
    )
    return engine, BackgroundCalibration(costs)


def open_remote_session(opts: SessionOptions) -> Session:
    """A session whose probes an agent attaches (this process needs no privilege): this
    node's (opts.agent) or another's (opts.host). A command is launched here, as the
    user, held until they are in."""
    specs = _parsed_specs(opts)  # a bad spec is said here, before anything starts
    if opts.host is not None and opts.target.command:
        raise SessionError(
            f"-- CMD would run here, not on {opts.host}: give --pid of a process there"
        )
    child, launch_notes, python_control = _held_command(opts, specs)
    pid = child.pid if child else opts.target.pid
    try:
        conn = AgentConnection(
            opts.agent or str(DEFAULT_SOCKET), opts.host, opts.cancel, opts.give_up_at
        )
    except (AgentUnavailable, AgentInterrupted) as exc:
        if child is not None:
            child.end()
        if python_control is not None:
            python_control.close()
        raise SessionError(str(exc)) from None
    try:
        conn.open(
            pid,
            opts.probing.specs,
            opts.probing.budget,
            opts.probing.enforce_budget,
            opts.probing.max_probes,
            child.path if child else None,
            opts.target.job,
            opts.probing.profile_hz,
        )
    except (AgentRefused, AgentInterrupted, OSError, ValueError) as exc:
        conn.close()
        if child is not None:
            child.end()
        if python_control is not None:
            python_control.close()
        raise SessionError(str(exc)) from None
    hub = AgentHub(conn)
    placement = (
        start_placement(opts, hub.snapshot(with_hist=False).devices)
        if opts.advisor.objective
        else None
    )
    return Session(
        hub=hub,
        remote=conn,
        child=child,
        launch_notes=launch_notes,
        python_control=python_control,
        pid=pid,
        options=opts,
        placement=placement,
    )


def _profiler(opts: SessionOptions, pid: int | None, job_pids: Sequence[int]) -> Profiler | None:
    """The sampled profile of the target's processes, attached before a command starts."""
    if opts.probing.profile_hz is None:
        return None
    pids = [pid] if pid is not None else list(job_pids)
    if not pids:
        raise SessionError("--profile needs a target: -- CMD, --pid or --job")
    return new_profiler(opts, pids, opts.probing.profile_hz, "--profile")


def new_profiler(opts: SessionOptions, pids: Sequence[int], hz: int, what: str) -> Profiler:
    """The one place a profiler is made: an agent's tenant's is confined to the user's own
    processes and unwound in a process of theirs."""
    tenant = opts.tenant
    try:
        confine = None if tenant.confine_uid is None else Confinement.of(tenant.confine_uid)
        counts = tenant.profile_counts or LocalCounts
        profiler = Profiler(
            pids, hz, counts=counts, confine=confine, owner=tenant.owner, budget=opts.probing.budget
        )
    except Exception as exc:  # LibbpfError, BTFError, WorkerFailed
        raise SessionError(f"{what}: {one_line(exc)}") from None
    if tenant.account is not None:  # the user's modules, across their sessions
        tenant.account.join(profiler)
    return profiler


def _parsed_specs(opts: SessionOptions) -> list[ProbeSpec]:
    """Every spec parsed (a bad one is one line), and a target given at most one way."""
    specs = []
    for text in opts.probing.specs:
        try:
            specs.append(parse_spec(text))
        except ProbeSpecError as exc:
            raise SessionError(exc.one_line) from None
    given = [
        w for w, v in (("--pid", opts.target.pid), ("--job", opts.target.job)) if v is not None
    ]
    given += ["-- CMD"] if opts.target.command else []
    if len(given) > 1:
        raise SessionError(f"give one target: {' or '.join(given)}, not both")
    return specs


def _job_processes(opts: SessionOptions) -> tuple[JobScan, list[int]]:
    """The job's processes here that may be probed; SessionError when there are none."""
    assert opts.target.job is not None
    try:
        scan = JobScan(opts.target.job)
    except JobError as exc:
        raise SessionError(str(exc)) from None
    found = scan.new_processes()
    pids = [p for p in found if opts.tenant.admit is None or opts.tenant.admit(p) is None]
    if not pids:
        yours = " that you may probe" if found else ""
        raise SessionError(f"job {scan.job_id} has no process on this node{yours}")
    return scan, pids


def _held_command(
    opts: SessionOptions, specs: Sequence[ProbeSpec]
) -> tuple[HeldCommand | None, tuple[str, ...], PythonControl | None]:
    try:
        return held_command(opts, specs)
    except LaunchError as exc:
        raise SessionError(str(exc), exc.status) from None


def start_placement(opts: SessionOptions, readings: Sequence[DeviceReading]) -> PlacementLoop:
    """The advisor (opts.advisor: its objective) over this node's execution targets, in
    the mode asked, and the control channel."""
    from adaptyst_top.placement import device_priors as dp
    from adaptyst_top.placement.control import ControlServer
    from adaptyst_top.placement.learned_advisor import LearnedAdvisor
    from adaptyst_top.placement.loop import PlacementLoop
    from adaptyst_top.runtime.model_store import app_of, kept_models

    targets = [r.id for r in readings if r.kind in ("cpu", "opencl")]
    if any(r.kind == "gpu" and r.id.startswith("gpu:") for r in readings):
        targets.append("cuda")
    try:
        control: ControlServer | None = ControlServer()
    except OSError:
        control = None  # the socket cannot be made: advise, but push nothing
    # An OpenCL GPU is a GPU to the advisor's first looks; PoCL's device the host's cores.
    kinds = {r.id: str(r.extra.get("type") or "cpu") for r in readings if r.kind == "opencl"}
    floors = dp.floors_s(targets, kinds)
    advisor = LearnedAdvisor(targets, objective=opts.advisor.objective, floors_s=floors)  # type: ignore[arg-type]
    app = app_of(opts.target.command, opts.target.pid) if opts.advisor.kept_models else None
    keep, prior = kept_models(app, advisor)
    loop = PlacementLoop(advisor, control, keep=keep, prior=prior)
    loop.set_mode("auto" if opts.advisor.auto else "suggest")
    return loop


def child_output_for(out_is_stdout: bool) -> IO[Any] | int | None:
    """The command's stdout goes to our stderr when ours carries the JSON lines (to
    nowhere when there is no stderr: never into the JSON stream)."""
    if not out_is_stdout:
        return None
    return sys.stderr if sys.stderr is not None else subprocess.DEVNULL


__all__ = ["Session", "SessionError", "SessionOptions", "open_session"]
