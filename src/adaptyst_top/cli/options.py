"""Options shared by the commands that watch a target (monitor, record)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, NoReturn

from adaptyst_top.collectors.probes.cost.overhead import DEFAULT_BUDGET, DEFAULT_MAX_ATTACH
from adaptyst_top.collectors.profile import DEFAULT_HZ as DEFAULT_PROFILE_HZ
from adaptyst_top.collectors.profile import HZ_RANGE as PROFILE_HZ_RANGE
from adaptyst_top.placement.objectives import OBJECTIVES
from adaptyst_top.runtime.job_tree import DEFAULT_FANOUT, FANOUT_RANGE
from adaptyst_top.runtime.limits import (
    BUDGET_RANGE,
    DEFAULT_INTERVAL,
    INTERVAL_RANGE,
    MAX_PROBES_RANGE,
    check_range,
    fraction_of_percent,
)
from adaptyst_top.runtime.remote.defaults import AGENT_ENV, DEFAULT_SOCKET
from adaptyst_top.system.version import package_version

if TYPE_CHECKING:  # imported when used: `adaptyst-top` starts fast, and Ctrl-C works early
    from adaptyst_top.collectors.devices.cpu import PowerModel
    from adaptyst_top.runtime.session import SessionOptions


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (the usage itself is one --help away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


class _Version(argparse.Action):
    """--version, asking importlib.metadata (26 ms) only when it is given."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kw: Any) -> None:
        print(f"{parser.prog} {package_version()}")  # stdout, as argparse's own action
        parser.exit(0)


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")


def bounded_float(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            return check_range(float(text), lo, hi)
        except ValueError as exc:
            msg = str(exc) if "must be" in str(exc) else f"not a number: {text!r}"
            raise argparse.ArgumentTypeError(msg) from None

    parse.__name__ = "number"
    return parse


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be {lo}..{hi}, not {value}")
        return value

    parse.__name__ = "integer"
    return parse


interval_s = bounded_float(*INTERVAL_RANGE)


def percent(text: str) -> float:
    return fraction_of_percent(bounded_float(*BUDGET_RANGE)(text.rstrip("%")))


def power_model(text: str) -> PowerModel:
    from adaptyst_top.collectors.devices.cpu import PowerModel

    try:
        return PowerModel.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_session_options(parser: argparse.ArgumentParser) -> None:
    # Imported here, not above: `agent` and `bridge` import this module, and a site may
    # run them on an interpreter without the engine's libraries (capstone, pyelftools).
    from adaptyst_top.collectors.probes.kinds import SYNTAX

    parser.add_argument(
        "--pid",
        type=bounded_int(1, 2**22),
        help="process to probe (and the processes it starts)",
    )
    parser.add_argument(
        "--job",
        metavar="ID",
        help="every process of Slurm job ID on this node, present and future; from a "
        "login node, on every node of the job, in one view (docs/mpi.md)",
    )
    parser.add_argument(
        "--fanout",
        type=bounded_int(*FANOUT_RANGE),
        metavar="N",
        help="with --job from a login node: the most ssh links one process holds; a job "
        "on more nodes is reached through relays on its nodes, N nodes each, "
        "{}..{} ({})".format(*FANOUT_RANGE, DEFAULT_FANOUT),
    )
    parser.add_argument(
        "--ranks",
        action="store_true",
        help="count each process apart, named by its MPI rank: per-rank rows and each "
        "row's imbalance (always with --job); mpi: probes the ranks' blocking MPI calls",
    )
    parser.add_argument(
        "--probe",
        action="append",
        default=[],
        metavar="SPEC",
        help=f"{SYNTAX} (repeatable): BEGIN..END a pair's latency, @argN[:str|:int] splits "
        "by argument N (from 1), @retval by a uprobe's return value; TARGET is a path "
        "or a library name like c",
    )
    # No argparse defaults for what the config file may also set: None means "not
    # given", and the command line, the config and the defaults merge in that order.
    parser.add_argument(
        "--interval",
        type=interval_s,
        metavar="S",
        help="refresh, {:g}..{:g} s ({:g})".format(*INTERVAL_RANGE, DEFAULT_INTERVAL),
    )
    parser.add_argument(
        "--budget",
        type=percent,
        metavar="PCT",
        help=f"probe overhead budget, %% of the target's CPU time ({DEFAULT_BUDGET * 100:g})",
    )
    parser.add_argument(
        "--enforce-budget",
        action="store_true",
        help="over budget, switch off the costliest probe",
    )
    parser.add_argument(
        "--max-probes",
        type=bounded_int(*MAX_PROBES_RANGE),
        default=DEFAULT_MAX_ATTACH,
        metavar="N",
        help=f"attach point limit, 1..100000 ({DEFAULT_MAX_ATTACH})",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample where the target's threads spend their time, on the CPU and off it "
        "(stacks unwound from each binary's tables: no frame pointers needed)",
    )
    parser.add_argument(
        "--profile-hz",
        type=bounded_int(*PROFILE_HZ_RANGE),
        metavar="HZ",
        help="on-CPU samples per second of each thread (implies --profile), {}..{} ({})".format(
            *PROFILE_HZ_RANGE, DEFAULT_PROFILE_HZ
        ),
    )
    parser.add_argument(
        "--keep-command",
        action="store_true",
        help="let a command launched with -- CMD outlive the monitor (default: it is ended, "
        "SIGTERM then SIGKILL, whenever the monitor stops)",
    )
    parser.add_argument(
        "--advisor",
        nargs="?",
        const="time",
        choices=OBJECTIVES,
        metavar="OBJECTIVE",
        help="run the placement advisor on the task probes (objective: time, energy, "
        "edp or weighted; default time)",
    )
    parser.add_argument(
        "--auto",
        action="store_true",
        help="with --advisor: apply its advice (push assignments to the application)",
    )
    parser.add_argument(
        "--fresh-models",
        action="store_true",
        help="with --advisor: start without the performance models kept from earlier runs "
        "of the application, and keep none from this one",
    )
    parser.add_argument(
        "--agent",
        metavar="PATH",
        help="the node agent's socket: probes attach there, as your user may "
        f"(${AGENT_ENV}; when not root, {DEFAULT_SOCKET} is used when it is there)",
    )
    parser.add_argument(
        "--host",
        metavar="NODE",
        help="watch NODE (from a login node): its agent, through `ssh NODE adaptyst-top "
        "bridge` (ssh from $ADAPTYST_TOP_SSH, adaptyst-top there from $ADAPTYST_TOP_REMOTE)",
    )
    parser.add_argument(
        "--cpu-power-model",
        type=power_model,
        metavar="IDLE_W:MAX_W",
        help="where RAPL is missing, estimate CPU power as IDLE + util x (MAX - IDLE); "
        "labelled `estimate`",
    )


def check_session_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What the common options cannot mean together: a usage error, in one line."""
    if args.fanout is not None and (args.job is None or args.host is not None):
        parser.error("--fanout goes with --job from a login node (not with --host)")


def session_options(
    args: argparse.Namespace,
    command: Sequence[str],
    child_stdout: IO[Any] | int | None = None,
    give_up_at: float | None = None,
) -> SessionOptions:
    """What `monitor` and `record` ask of a session, from their common options."""
    from adaptyst_top.runtime import session_options as so

    return so.SessionOptions(
        target=so.Target(
            pid=args.pid,
            job=None if args.job is None else args.job.strip(),  # as a node's relay reads it
            job_fanout=DEFAULT_FANOUT if args.fanout is None else args.fanout,
            command=command,
            keep_command=args.keep_command,
            child_stdout=child_stdout,
        ),
        probing=so.ProbeSettings(
            specs=args.probe,
            budget=DEFAULT_BUDGET if args.budget is None else args.budget,
            enforce_budget=args.enforce_budget,
            max_probes=args.max_probes,
            power_model=args.cpu_power_model,
            profile_hz=args.profile_hz or (DEFAULT_PROFILE_HZ if args.profile else None),
            by_process=args.ranks,
        ),
        advisor=so.AdvisorSettings(
            objective=args.advisor, auto=args.auto, kept_models=not args.fresh_models
        ),
        agent=agent_socket(args.agent),
        host=args.host,
        give_up_at=give_up_at,
    )


def agent_socket(given: str | None) -> str | None:
    """The agent to use: --agent, else $ADAPTYST_TOP_AGENT, else (not root) the default
    socket when it is there; None: probes attach in this process (root)."""
    if given:
        return given
    if os.environ.get(AGENT_ENV):
        return os.environ[AGENT_ENV]
    if os.geteuid() != 0 and DEFAULT_SOCKET.is_socket():
        return str(DEFAULT_SOCKET)
    return None
