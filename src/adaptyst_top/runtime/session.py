"""What every front end does first: launch or find the target, attach the probes, start
calibration, build the hub and the advisor, and join their parts of each snapshot.
Errors come back as one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from adaptyst_top.collectors.hub import Hub
from adaptyst_top.collectors.profile import DEFAULT_HZ as DEFAULT_PROFILE_HZ
from adaptyst_top.runtime.command_env import held_command
from adaptyst_top.runtime.ranks import Named, with_ranks
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.runtime.session_parts import (
    SessionError,
    attach_specs,
    new_engine,
    new_profiler,
    parsed_specs,
    start_placement,
    watch_devices,
)
from adaptyst_top.snapshot import CommandState, Snapshot
from adaptyst_top.system.launcher import HeldCommand, LaunchError
from adaptyst_top.system.mpi_ranks import RankNames

if TYPE_CHECKING:
    # Imported where used: a launch imports only what attaching its probes needs, and
    # the command runs before the rest (bench/bench_launch.py). The advisor's numpy
    # alone costs a launch 80 ms, the agent's client 60-90 ms.
    from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
    from adaptyst_top.collectors.probes.spec import ProbeSpec
    from adaptyst_top.collectors.profile.profiler import Profiler
    from adaptyst_top.placement.loop import PlacementLoop
    from adaptyst_top.runtime.job_fanout import JobFanout
    from adaptyst_top.runtime.job_watch import JobWatch
    from adaptyst_top.runtime.python_control import PythonControl
    from adaptyst_top.runtime.remote.client import AgentConnection, AgentHub
    from adaptyst_top.system.slurm_jobs import JobScan


@dataclass
class Session:
    hub: Hub | AgentHub | JobFanout
    engine: ProbeEngine | None = None
    # The agent's, when the probes are there; a job's nodes', each its own agent's.
    remote: AgentConnection | JobFanout | None = None
    child: HeldCommand | None = None
    pid: int | None = None
    calibration: BackgroundCalibration | None = None
    options: SessionOptions = field(default_factory=SessionOptions)
    placement: PlacementLoop | None = None
    job_watch: JobWatch | None = None
    profiler: Profiler | None = None  # the hub's, closed with it
    launch_notes: tuple[str, ...] = ()  # what launching the command said, not told yet
    python_control: PythonControl | None = None  # python: probes added while it runs
    # The last snapshot taken (before any view of it is filtered), histograms included,
    # kept only for the agent's exporter (exported), which reads it between ticks.
    last: Snapshot | None = None
    exported: bool = False
    devices_at_start: bool = False  # the device sweep starts once the command runs
    rank_names: RankNames = field(default_factory=RankNames)  # the job's processes' ranks
    named: Named = field(default_factory=dict)  # the last snapshot's entries, named
    _exit_told: bool = False
    _log_told: bool = False

    def start(self) -> None:
        """Release the held command; SessionError (status 126/127) when it cannot run."""
        if self.child is not None:
            try:
                self.child.release(keep=self.options.target.keep_command)
            except LaunchError as exc:
                raise SessionError(str(exc), exc.status) from None
        if self.devices_at_start:
            self.devices_at_start = False
            try:
                watch_devices(self.hub, self.pid, self.options)
            except Exception as exc:  # a collector's own fault: the command runs on, unread
                said = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
                self.launch_notes += (f"devices not read: {said}",)

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        """The hub's snapshot, with the advisor's part when it runs, and the launched
        command's state (its exit status once it has one)."""
        if self.profiler is not None and self.child is not None and self.child.poll() is not None:
            self.profiler.drain()  # the command's last events in its last snapshot
        # The advisor reads an interval's median from the histograms' growth.
        snap = self.hub.snapshot(with_hist or self.placement is not None or self.exported)
        if self.placement is not None:
            part = self.placement.update(snap)
            snap = replace(snap, tasks=part.tasks, advice=part.advice, advisor=part.advisor)
        snap = self._with_command(snap)
        if self.options.tenant.users_own and self.options.host is None:  # its processes are here
            snap = with_ranks(snap, self.rank_names, self.named)
        if self.exported:
            self.last = snap
        if not with_hist and any(p.hist is not None for p in snap.probes):
            # Asked for another reader's sake only (the advisor, the exporter).
            snap = replace(snap, probes=tuple(replace(p, hist=None) for p in snap.probes))
        return snap

    def _with_command(self, snap: Snapshot) -> Snapshot:
        """SNAP with the launched command's state and what launching it said."""
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
                from adaptyst_top.collectors.probes.model import ProbeError

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
        from adaptyst_top.system.targets import check_pid

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
    job = opts.target.job is not None and opts.host is None and opts.tenant.users_own
    if job and (nodes := job_elsewhere(opts)):
        return open_job_session(opts, nodes)
    if opts.agent is not None or opts.host is not None:
        return open_remote_session(opts)
    specs = parsed_specs(opts)
    if opts.target.pid is not None:
        from adaptyst_top.system.targets import TargetError, check_pid

        try:
            check_pid(opts.target.pid)
        except TargetError as exc:
            raise SessionError(str(exc)) from None
    scan, job_pids = _job_processes(opts) if opts.target.job is not None else (None, [])
    child, launch_notes, python_control = hold_command(opts, specs)
    pid = child.pid if child else opts.target.pid
    engine = calibration = None
    try:
        if specs or scan is not None:  # a job's engine starts now: its processes come on
            from adaptyst_top.collectors.probes.model import ProbeError

            try:
                engine, calibration = new_engine(opts, pid, child, job_pids)
                attach_specs(engine, specs, opts)
            except ProbeError as exc:
                raise SessionError(str(exc)) from None
        profiler = _profiler(opts, pid, job_pids)
    except SessionError:
        if calibration is not None:
            calibration.close()
        if engine is not None:
            engine.close()
        if child is not None:
            child.end()
        if python_control is not None:
            python_control.close()
        raise
    hub = Hub(engine, None, profiler)
    job_watch = None
    if scan is not None and engine is not None:
        from adaptyst_top.runtime.job_watch import JobWatch

        job_watch = JobWatch(scan, engine, profiler=profiler)
    session = Session(
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
        devices_at_start=child is not None and not opts.advisor.objective,
    )
    if not session.devices_at_start:  # no command held: nothing to start sooner
        sweep = watch_devices(hub, pid, opts)
        if opts.advisor.objective:
            session.placement = start_placement(opts, sweep.read())
    return session


def open_remote_session(opts: SessionOptions) -> Session:
    """A session whose probes an agent attaches (this process needs no privilege): this
    node's (opts.agent) or another's (opts.host). A command is launched here, as the
    user, held until they are in."""
    from adaptyst_top.runtime.remote.client import (
        AgentConnection,
        AgentHub,
        AgentInterrupted,
        AgentRefused,
        AgentUnavailable,
    )
    from adaptyst_top.runtime.remote.defaults import DEFAULT_SOCKET

    specs = parsed_specs(opts)  # a bad spec is said here, before anything starts
    if opts.host is not None and opts.target.command:
        raise SessionError(
            f"-- CMD would run here, not on {opts.host}: give --pid of a process there"
        )
    child, launch_notes, python_control = hold_command(opts, specs)
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
            opts.probing.by_process,
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


def job_elsewhere(opts: SessionOptions) -> list[str]:
    """The nodes of the job, where it runs on any but this one alone (this is a login
    node, or one of several): each is then asked through SSH. [] for a job here alone,
    or where Slurm cannot say where it runs."""
    import socket

    from adaptyst_top.system.slurm_jobs import JobError, job_info, job_nodes

    assert opts.target.job is not None
    try:
        info = job_info(opts.target.job)
        nodes = job_nodes(info)
    except JobError as exc:
        raise SessionError(str(exc)) from None
    if not nodes and info.state == "PENDING":
        raise SessionError(f"job {info.job_id} is pending: it runs on no node yet")
    if not nodes or nodes == [socket.gethostname().split(".")[0]]:
        return []  # here alone: this node's agent decides
    if info.owner_uid is not None and os.getuid() not in (0, info.owner_uid):
        # Each node's agent would say the same (and a node whose sshd lets only the job's
        # user in, pam_slurm_adopt, would say nothing): said once, here.
        raise SessionError(
            f"job {info.job_id} belongs to user {info.owner}; you may target your own jobs"
        )
    return nodes


def open_job_session(opts: SessionOptions, nodes: Sequence[str]) -> Session:
    """A job's session over its NODES, each through `ssh NODE adaptyst-top bridge`."""
    from adaptyst_top.runtime.job_fanout import JobFanout, JobRefused

    specs = parsed_specs(opts)  # a bad spec is said here, before any node is asked
    if opts.target.command or opts.target.pid is not None:
        raise SessionError("--job watches a job's processes: no --pid or -- CMD with it")
    assert opts.target.job is not None
    try:
        fanout = JobFanout(
            opts.target.job,
            nodes,
            replace(opts, probing=replace(opts.probing, specs=[s.text for s in specs])),
        )
    except JobRefused as exc:
        raise SessionError(str(exc)) from None
    return Session(hub=fanout, remote=fanout, options=opts)


def _profiler(opts: SessionOptions, pid: int | None, job_pids: Sequence[int]) -> Profiler | None:
    """The sampled profile of the target's processes, attached before a command starts."""
    if opts.probing.profile_hz is None:
        return None
    pids = [pid] if pid is not None else list(job_pids)
    if not pids:
        raise SessionError("--profile needs a target: -- CMD, --pid or --job")
    return new_profiler(opts, pids, opts.probing.profile_hz, "--profile")


def _job_processes(opts: SessionOptions) -> tuple[JobScan, list[int]]:
    """The job's processes here that may be probed; SessionError when there are none."""
    assert opts.target.job is not None
    from adaptyst_top.system.slurm_jobs import JobError, JobScan

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


def hold_command(
    opts: SessionOptions, specs: Sequence[ProbeSpec]
) -> tuple[HeldCommand | None, tuple[str, ...], PythonControl | None]:
    try:
        return held_command(opts, specs)
    except LaunchError as exc:
        raise SessionError(str(exc), exc.status) from None


def child_output_for(out_is_stdout: bool) -> IO[Any] | int | None:
    """The command's stdout goes to our stderr when ours carries the JSON lines (to
    nowhere when there is no stderr: never into the JSON stream)."""
    if not out_is_stdout:
        return None
    return sys.stderr if sys.stderr is not None else subprocess.DEVNULL


__all__ = ["Session", "SessionError", "SessionOptions", "open_session"]
