"""The parts of a session, each made in one place whatever the front end (record, the
monitor, the agent): the specs parsed, the engine and its probes attached, the profiler,
the device sweep, the advisor. Each imports what it makes when it makes it: a launch
loads only what attaching its own probes needs before its command runs
(bench/bench_launch.py); the advisor's numpy alone costs a launch 80 ms."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from adaptyst_top.collectors.hub import Hub
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.snapshot import DeviceReading

if TYPE_CHECKING:
    from adaptyst_top.collectors.devices.sweep import DeviceSweep
    from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
    from adaptyst_top.collectors.probes.spec import ProbeSpec
    from adaptyst_top.collectors.profile.profiler import Profiler
    from adaptyst_top.placement.loop import PlacementLoop
    from adaptyst_top.runtime.job_fanout import JobFanout
    from adaptyst_top.runtime.remote.client import AgentHub
    from adaptyst_top.system.launcher import HeldCommand


class SessionError(RuntimeError):
    """One line for the user; the CLI exits with `status` (1, or a shell's 126/127)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def parsed_specs(opts: SessionOptions) -> list[ProbeSpec]:
    """Every spec parsed (a bad one is one line), and a target given at most one way."""
    from adaptyst_top.collectors.probes.kinds import parse_spec
    from adaptyst_top.collectors.probes.spec import ProbeSpecError

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


def attach_specs(engine: ProbeEngine, specs: Sequence[ProbeSpec], opts: SessionOptions) -> None:
    """SPECS attached, or SessionError: the first reason of each kind, a timeout, or Ctrl-C."""
    from adaptyst_top.collectors.probes.engine.state import ATTACH_S_PER_POINT

    groups = [engine.add(s) for s in specs]
    start = time.monotonic()
    while not engine.wait(0.1):
        if opts.cancel.is_set():
            raise SessionError("interrupted while attaching: the command never ran")
        points = sum(g.planned for g in groups)
        limit = opts.probing.attach_timeout + ATTACH_S_PER_POINT * points
        if time.monotonic() - start > limit:
            raise SessionError(f"probes not attached after {limit:.0f}s ({points} attach points)")
    if opts.cancel.is_set():
        raise SessionError("interrupted while attaching: the command never ran")
    errors = list(dict.fromkeys(g.error for g in groups if g.state == "error"))
    if errors:  # each reason once (two specs on a target that exited: one line)
        raise SessionError("; ".join(errors))


def watch_devices(
    hub: Hub | AgentHub | JobFanout, pid: int | None, opts: SessionOptions
) -> DeviceSweep:
    """The node's devices, read by HUB from now on. A held command is released first:
    their collectors' imports and start would cost its launch 30-40 ms."""
    from adaptyst_top.collectors.devices.sweep import DeviceSweep

    sweep = DeviceSweep(pid=pid, power_model=opts.probing.power_model)
    if isinstance(hub, Hub):
        hub.devices = sweep
    return sweep


def new_engine(
    opts: SessionOptions,
    pid: int | None,
    child: HeldCommand | None,
    job_pids: Sequence[int] = (),
) -> tuple[ProbeEngine, BackgroundCalibration]:
    """The one place an engine is made: every option applies wherever it is started."""
    from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration
    from adaptyst_top.collectors.probes.cost.table import CostTable
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine

    costs = CostTable()
    engine = ProbeEngine(
        pid=pid,
        scope=job_pids if opts.target.job is not None else None,
        follow=opts.target.follow,
        admit=opts.tenant.admit,
        scope_name=f"job {opts.target.job}" if opts.target.job is not None else None,
        command_path=child.path if child else opts.target.command_path,
        max_attach=opts.probing.max_probes,
        account=opts.tenant.account,
        confine_uid=opts.tenant.confine_uid,
        pinned=opts.tenant.pinned,
        costs=costs,
        budget=opts.probing.budget,
        enforce_budget=opts.probing.enforce_budget,
        by_process=opts.probing.by_process or opts.target.job is not None,
    )
    return engine, BackgroundCalibration(costs)


def new_profiler(opts: SessionOptions, pids: Sequence[int], hz: int, what: str) -> Profiler:
    """The one place a profiler is made: an agent's tenant's is confined to the user's own
    processes and unwound in a process of theirs."""
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
    from adaptyst_top.collectors.probes.model import one_line
    from adaptyst_top.collectors.probes.safety.confinement import Confinement
    from adaptyst_top.collectors.profile.profiler import LocalCounts, Profiler

    tenant = opts.tenant
    try:
        if tenant.confine_uid is None:  # this process's own: it may lack the privileges
            ProbeEngine.require_ebpf()  # said as a probe says it, not libbpf's EPERM
        confine = None if tenant.confine_uid is None else Confinement.of(tenant.confine_uid)
        counts = tenant.profile_counts or LocalCounts
        profiler = Profiler(pids, hz, counts=counts, confine=confine, budget=opts.probing.budget)
    except Exception as exc:  # LibbpfError, BTFError, WorkerFailed
        raise SessionError(f"{what}: {one_line(exc)}") from None
    if tenant.account is not None:  # the user's modules, across their sessions
        tenant.account.join(profiler)
    return profiler


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
