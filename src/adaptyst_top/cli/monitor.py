"""The monitor: the TUI over a live session (the program without a subcommand, and demo)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptyst_top.cli.commands import summaries, usage
from adaptyst_top.cli.options import (
    Parser,
    add_session_options,
    add_version,
    check_session_args,
    session_options,
)
from adaptyst_top.runtime.run_lifecycle import RunLifecycle, once
from adaptyst_top.system.private_files import private_log

if TYPE_CHECKING:  # imported when used: `adaptyst-top` starts fast, and Ctrl-C works early
    from adaptyst_top.runtime.config import Config
    from adaptyst_top.runtime.session import SessionOptions

DESCRIPTION = (
    "Live monitor for CPU/GPU/FPGA nodes: eBPF/USDT function latencies, device power and "
    "energy, and a placement advisor."
)
EPILOG = """subcommands:
{subcommands}

examples:
  adaptyst-top --probe 'uprobe:./app:solve*' -- ./app input.dat
  adaptyst-top record --pid 4242 --probe 'usdt:./app:app:task_begin..task_end@arg1' --duration 10
  adaptyst-top list --binary ./app

`adaptyst-top SUBCOMMAND --help` tells more.
"""


def add_display_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ascii", action="store_true", help="ASCII bars, sparklines and borders")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="config file (default: $XDG_CONFIG_HOME/adaptyst-top/config.toml)",
    )


def monitor_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top",
        usage=usage(),
        description=DESCRIPTION,
        epilog=EPILOG.format(subcommands=summaries()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version(p)
    add_session_options(p)
    add_display_options(p)
    return p


def load_config_or_exit(path: str | None) -> Config | None:
    from adaptyst_top.runtime.config import ConfigError, load_config

    try:
        config = load_config(Path(path) if path else None)
    except ConfigError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return None
    for warning in config.warnings:
        print(f"adaptyst-top: {warning}", file=sys.stderr)
    return config


@dataclass
class ViewOptions:
    """The monitor's own options beside the session's: what the config file may also set
    (None: not given on the command line) and how the screen looks."""

    interval: float | None = None  # None: the config's refresh, else the default
    budget: float | None = None  # None: the config's budget, else the default
    ascii: bool = False
    config: str | None = None  # None: $XDG_CONFIG_HOME/adaptyst-top/config.toml


def view_options(args: argparse.Namespace) -> ViewOptions:
    return ViewOptions(args.interval, args.budget, args.ascii, args.config)


def run_monitor(opts: SessionOptions, view: ViewOptions) -> int:
    """The TUI over a live session of OPTS (opts.target.command launched under it)."""
    from adaptyst_top.collectors.devices.cpu import PowerModel
    from adaptyst_top.runtime.config import merged_settings
    from adaptyst_top.runtime.session import SessionError, open_session
    from adaptyst_top.runtime.sources import LiveSource
    from adaptyst_top.tui.app import MonitorApp

    config = load_config_or_exit(view.config)
    if config is None:
        return 1
    command = opts.target.command
    interval, budget = merged_settings(view.interval, view.budget, config)
    probing = replace(opts.probing, specs=[*config.probes, *opts.probing.specs], budget=budget)
    if probing.power_model is None and config.cpu_power_model:
        try:
            probing = replace(probing, power_model=PowerModel.parse(config.cpu_power_model))
        except ValueError as exc:
            print(f"adaptyst-top: {config.path}: {exc}", file=sys.stderr)
            return 1
    opts = replace(opts, probing=probing)
    log_path = None
    if command:
        # The command's output would garble the screen: it goes to a fresh file in a
        # private folder (never a predictable name in /tmp), removed when the monitor ends.
        try:
            fd, log_path = private_log("command")
        except OSError as exc:
            print(f"adaptyst-top: no place for the command's output: {exc}", file=sys.stderr)
            return 1
        target = replace(
            opts.target,
            child_stdout=fd,
            child_stderr=fd,
            command_log=str(log_path),
            python_later=True,
        )
        opts = replace(opts, target=target)
    app: Any = None
    close: Callable[[], None] | None = None
    # The command's output told and its file removed, once: here at the end, or by the
    # quit deadline when the shutdown hangs (the file would outlive the run).
    tell_and_remove = once(
        lambda: None if log_path is None else _tell_and_remove(log_path, command)
    )

    def on_quit(_signum: int) -> None:
        # Before the screen is up: the attach is given up (the command never runs).
        # After: quit like q (a closed SSH session is SIGHUP): probes detach, the
        # command is ended.
        if app is not None:
            app.exit()

    life = RunLifecycle(opts.cancel, on_quit)
    life.install()
    try:
        try:
            session = open_session(opts)
        finally:
            if isinstance(opts.target.child_stdout, int):
                os.close(opts.target.child_stdout)  # the child holds its own copy
        try:
            if opts.cancel.is_set():
                raise SessionError("interrupted before the command started")
            session.start()
            close = once(session.close)  # the main thread's, or the quit deadline's
            life.last_resort(close, tell_and_remove)
            app = MonitorApp(
                LiveSource(session),
                interval=interval,
                config=config,
                ascii=view.ascii,
                profile_first=opts.probing.profile_hz is not None and not opts.probing.specs,
            )
            app.run()
        finally:
            # The app's loop took the signals while it ran and gave back the default
            # actions as it closed: a SIGTERM now would end us with the command running.
            life.install()
            (session.close if close is None else close)()
    except SessionError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return exc.status
    finally:
        tell_and_remove()
    return 0


def _tell_and_remove(log_path: Path, command: Sequence[str], lines: int = 20) -> None:
    """The last lines of the command's output to our stderr, then the file is gone."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            tail = f.read().decode(errors="replace").splitlines()[-lines:]
        if tail:
            print(f"adaptyst-top: last output of {command[0]}:", file=sys.stderr)
            print("\n".join(tail), file=sys.stderr)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        os.unlink(log_path)


def cmd_monitor(argv: Sequence[str], command: Sequence[str]) -> int:
    parser = monitor_parser()
    args = parser.parse_args(argv)
    check_session_args(parser, args)
    return run_monitor(session_options(args, command), view_options(args))
