"""Options shared by the commands that watch a target (monitor, record)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from adaptyst_top.collectors.cpu import PowerModel
from adaptyst_top.collectors.version import package_version
from adaptyst_top.tui.session import SessionOptions


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def percent(text: str) -> float:
    return positive_float(text.rstrip("%")) / 100.0


def power_model(text: str) -> PowerModel:
    try:
        return PowerModel.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pid", type=int, help="process to probe and follow")
    parser.add_argument(
        "--probe",
        action="append",
        default=[],
        metavar="SPEC",
        help="uprobe:TARGET:FUNC | usdt:TARGET:PROVIDER:NAME | "
        "usdt:TARGET:PROVIDER:BEGIN..END, with @argN[:str|:int] to split usdt by an "
        "argument (repeatable); TARGET is a path or a library name like c",
    )
    parser.add_argument(
        "--interval", type=positive_float, default=1.0, metavar="S", help="refresh (1.0)"
    )
    parser.add_argument(
        "--budget",
        type=percent,
        default=0.02,
        metavar="PCT",
        help="probe overhead budget, %% of the target's CPU time (2)",
    )
    parser.add_argument(
        "--enforce-budget",
        action="store_true",
        help="over budget, switch off the costliest probe",
    )
    parser.add_argument(
        "--max-probes", type=int, default=1000, metavar="N", help="attach point limit (1000)"
    )
    parser.add_argument(
        "--advisor",
        nargs="?",
        const="time",
        choices=("time", "energy", "edp", "weighted"),
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
        "--cpu-power-model",
        type=power_model,
        metavar="IDLE_W:MAX_W",
        help="where RAPL is missing, estimate CPU power as IDLE + util x (MAX - IDLE); "
        "labelled `estimate`",
    )


def session_options(args: argparse.Namespace, command: Sequence[str]) -> SessionOptions:
    return SessionOptions(
        pid=args.pid,
        probes=args.probe,
        command=command,
        budget=args.budget,
        enforce_budget=args.enforce_budget,
        max_probes=args.max_probes,
        power_model=args.cpu_power_model,
        advisor=args.advisor,
        auto=args.auto,
    )
