"""What a session is asked to do, in frozen parts: the target, the probes' settings, the
advisor's, and (the agent's only) the tenant's bounds. A front end builds them once;
what a config file adds makes new parts (`dataclasses.replace`), never a change."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from adaptyst_top.collectors.probes.cost.overhead import DEFAULT_BUDGET, DEFAULT_MAX_ATTACH
from adaptyst_top.placement.objectives import Objective
from adaptyst_top.runtime.job_tree import DEFAULT_FANOUT
from adaptyst_top.runtime.stop_flag import StopFlag

if TYPE_CHECKING:  # types only: a launch imports the engine and devices when it uses them
    from adaptyst_top.collectors.devices.cpu import PowerModel
    from adaptyst_top.collectors.probes.engine.attach_account import AttachAccount
    from adaptyst_top.collectors.profile.profiler import Counts
    from adaptyst_top.system.pinned_files import PinnedFiles


@dataclass(frozen=True)
class Target:
    """What is probed: a process, a Slurm job's processes on this node, or a command
    launched under the session."""

    pid: int | None = None
    job: str | None = None  # a Slurm job: its processes on this node, present and future
    job_fanout: int = DEFAULT_FANOUT  # a job's nodes one process reaches (job_tree.py)
    follow: bool = True  # the processes a probed process starts are probed too
    command: Sequence[str] = ()
    # The program of a command held at the door elsewhere (a client of the agent).
    command_path: str | None = None
    keep_command: bool = False  # let a launched command outlive the monitor
    # A launched Python takes python: probes added while it runs (a screen's keys).
    python_later: bool = False
    command_log: str | None = None  # where its output goes while a screen is up
    child_stdout: IO[Any] | int | None = None
    child_stderr: IO[Any] | int | None = None


@dataclass(frozen=True)
class ProbeSettings:
    specs: Sequence[str] = ()
    budget: float = DEFAULT_BUDGET  # the probes' share of the target's CPU time
    enforce_budget: bool = False  # detach the costliest probe past the budget
    max_probes: int = DEFAULT_MAX_ATTACH
    attach_timeout: float = 120.0
    power_model: PowerModel | None = None  # CPU power where RAPL is missing
    profile_hz: int | None = None  # sampled profiles at this rate (None: none)
    # Each process's hits counted apart, their MPI ranks named (--ranks; a job's always).
    by_process: bool = False


@dataclass(frozen=True)
class AdvisorSettings:
    objective: Objective | None = None  # None: no advisor
    auto: bool = False  # apply its advice
    # Start from the models of earlier runs, and keep its own for the next
    # (runtime/model_store.py).
    kept_models: bool = True


@dataclass(frozen=True)
class Tenant:
    """The agent's bounds on a user's session; the defaults are a local session's."""

    # A process's refusal (None: it may be probed): the agent's rule for its user.
    admit: Callable[[int], str | None] | None = None
    account: AttachAccount | None = None  # the owner's bound across their sessions
    confine_uid: int | None = None  # hits count only in this user's own processes
    pinned: PinnedFiles | None = None  # the only files specs may name (the engine closes them)
    # Where a profile's stacks are unwound (None: here): the agent's, in the user's process.
    profile_counts: Callable[[], Counts] | None = None
    # This session runs in the user's own process (the monitor), not in the agent: it reads
    # its processes' MPI ranks from their environment (root reads no user's), and reaches a
    # job's other nodes through SSH (the agent watches its own node alone).
    users_own: bool = True


@dataclass(frozen=True)
class SessionOptions:
    target: Target = Target()
    probing: ProbeSettings = ProbeSettings()
    advisor: AdvisorSettings = AdvisorSettings()
    tenant: Tenant = Tenant()
    agent: str | None = None  # a node agent's socket: probes attach there, not here
    host: str | None = None  # another node: its agent, through `ssh HOST adaptyst-top bridge`
    # Set (by a signal handler) to give up attaching: the command is then never started.
    cancel: StopFlag = field(default_factory=StopFlag)
    # No answer of an agent is waited for past this time.monotonic() (record's --duration).
    give_up_at: float | None = None
