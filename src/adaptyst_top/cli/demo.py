"""`adaptyst-top demo`: the demo workload under the monitor, its task probes and the
placement advisor (auto by default: the workload is ours, and follows the advice)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from adaptyst_top.cli.monitor import ViewOptions, run_monitor
from adaptyst_top.cli.options import Parser, add_version, agent_socket, bounded_float, interval_s
from adaptyst_top.placement.objectives import OBJECTIVES
from adaptyst_top.runtime.limits import DEFAULT_INTERVAL, PHASE_RANGE


def demo_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top demo",
        description="The demo workload with its probes and the placement advisor.",
    )
    add_version(p)
    p.add_argument("--interval", type=interval_s, default=DEFAULT_INTERVAL, metavar="S")
    p.add_argument("--objective", default="time", choices=OBJECTIVES)
    p.add_argument(
        "--phase-s",
        type=bounded_float(*PHASE_RANGE),
        default=12.0,
        metavar="S",
        help="seconds per workload phase (12)",
    )
    p.add_argument(
        "--suggest",
        action="store_true",
        help="only suggest moves (m applies one, M switches to auto); the demo's default is "
        "auto: its own workload follows the advisor",
    )
    return p


def cmd_demo(argv: Sequence[str], command: Sequence[str]) -> int:
    import importlib.util

    if command:  # it runs its own workload: a command given would be silently dropped
        print(
            "adaptyst-top: demo runs its own workload and takes no command; "
            f"to monitor {command[0]}: adaptyst-top --probe SPEC -- {' '.join(command)}",
            file=sys.stderr,
        )
        return 2

    if importlib.util.find_spec("scipy") is None:
        print(
            "adaptyst-top: the demo workload needs scipy: pip install 'adaptyst-top[demo]'",
            file=sys.stderr,
        )
        return 1
    from adaptyst_top.placement.demo import command as demo_command
    from adaptyst_top.placement.task_api import TASK_SPEC
    from adaptyst_top.runtime import session_options as so

    args = demo_parser().parse_args(argv)
    opts = so.SessionOptions(
        target=so.Target(command=demo_command(phase_s=args.phase_s)),
        probing=so.ProbeSettings(specs=[TASK_SPEC]),
        advisor=so.AdvisorSettings(objective=args.objective, auto=not args.suggest),
        agent=agent_socket(None),  # as the monitor: the node's agent when not root
    )
    return run_monitor(opts, ViewOptions(interval=args.interval))
