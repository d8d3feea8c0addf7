"""The `adaptyst-top` command line: the TUI by default, and its subcommands."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.private_files import private_log
from adaptyst_top.runtime.config import Config
from adaptyst_top.runtime.limits import DEFAULT_INTERVAL, SPEED_RANGE
from adaptyst_top.tui.cli_common import (
    Parser,
    add_session_options,
    add_version,
    bounded_float,
    interval_s,
    session_options,
)
from adaptyst_top.tui.quit_signals import QUIT_SIGNALS

SUBCOMMANDS = (
    "demo",
    "record",
    "list",
    "doctor",
    "replay",
    "export",
    "agent",
    "bridge",
    "cluster",
)

DESCRIPTION = (
    "Live monitor for CPU/GPU/FPGA nodes: eBPF/USDT function latencies, device power and "
    "energy, and a placement advisor."
)
EPILOG = """subcommands:
  demo      run the built-in demo workload with its probes and the advisor
  record    headless: one JSON snapshot per interval
  list      function symbols and USDT probes of a PID or binary
  doctor    which capabilities this machine has (eBPF, NVML, RAPL, OpenCL, FPGA)
  replay    play a recording in the TUI
  export    a recording (compact, .zst) as full JSON lines, for jq and other tools
  agent     the node agent (root): users probe their own processes through it
  bridge    this node's agent on standard input and output (what --host runs over ssh)
  cluster   every node (or a Slurm job's) from Prometheus, where the agents' metrics go

examples:
  adaptyst-top --probe 'uprobe:./app:solve*' -- ./app input.dat
  adaptyst-top record --pid 4242 --probe 'usdt:./app:app:task_begin..task_end@arg1' --duration 10
  adaptyst-top list --binary ./app

`adaptyst-top SUBCOMMAND --help` tells more.
"""


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Options before `--`, the command to launch after it (None: no `--` at all)."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, None


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
        usage="adaptyst-top [--pid PID | --job ID] [--probe SPEC]... [--interval S] [-- CMD ARGS...]\n"
        "       adaptyst-top {demo,record,list,doctor,replay} ...",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version(p)
    add_session_options(p)
    add_display_options(p)
    return p


def replay_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top replay",
        description="Play a `record` file in the monitor's screens: p pauses, < and > "
        "change the speed.",
    )
    add_version(p)
    p.add_argument("file", help="a file written by `adaptyst-top record`")
    p.add_argument(
        "--speed",
        type=bounded_float(*SPEED_RANGE),
        default=1.0,
        help="playback speed, {:g}..{:g} (1.0)".format(*SPEED_RANGE),
    )
    p.add_argument(
        "--interval",
        type=interval_s,
        default=DEFAULT_INTERVAL,
        metavar="S",
        help=f"recorded interval ({DEFAULT_INTERVAL:g})",
    )
    add_display_options(p)
    return p


def doctor_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top doctor",
        description="Check each capability: ebpf, nvml, rapl, amd-gpu, opencl, fpga. "
        "Exit status 0 when the monitor can run at all.",
    )
    add_version(p)
    p.add_argument("--json", action="store_true", help="one JSON array on stdout")
    p.add_argument(
        "--no-smoke", action="store_true", help="skip the one-probe eBPF smoke test (~1 s)"
    )
    p.add_argument("--agent", metavar="PATH", help="the node agent's socket to ask about")
    return p


def cmd_doctor(argv: Sequence[str]) -> int:
    from adaptyst_top.collectors.doctor import can_run, run_doctor
    from adaptyst_top.runtime.agent_check import check_agent
    from adaptyst_top.tui.cli_common import agent_socket

    args = doctor_parser().parse_args(argv)
    caps = [*run_doctor(run_smoke=not args.no_smoke), check_agent(agent_socket(args.agent))]
    if args.json:
        print(json.dumps([c.to_json() for c in caps], indent=None))
    else:
        width = max(len(c.name) for c in caps)
        for c in caps:
            fix = f"  fix: {c.fix}" if c.fix and c.status != "ok" else ""
            print(f"{c.name:<{width}}  {c.status:<8}  {c.detail}{fix}")
    return 0 if can_run(caps) else 1


def load_config_or_exit(args: argparse.Namespace) -> Config | None:
    from pathlib import Path

    from adaptyst_top.runtime.config import ConfigError, load_config

    try:
        config = load_config(Path(args.config) if args.config else None)
    except ConfigError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return None
    for warning in config.warnings:
        print(f"adaptyst-top: {warning}", file=sys.stderr)
    return config


def run_monitor(args: argparse.Namespace, command: Sequence[str]) -> int:
    from adaptyst_top.collectors.cpu import PowerModel
    from adaptyst_top.runtime.config import merged_settings
    from adaptyst_top.runtime.session import SessionError, open_session
    from adaptyst_top.runtime.sources import LiveSource
    from adaptyst_top.tui.app import MonitorApp

    config = load_config_or_exit(args)
    if config is None:
        return 1
    opts = session_options(args, command)
    opts.probes = [*config.probes, *opts.probes]
    interval, opts.budget = merged_settings(args.interval, args.budget, config)
    if opts.power_model is None and config.cpu_power_model:
        try:
            opts.power_model = PowerModel.parse(config.cpu_power_model)
        except ValueError as exc:
            print(f"adaptyst-top: {config.path}: {exc}", file=sys.stderr)
            return 1
    log_path = None
    if command:
        # The command's output would garble the screen: it goes to a fresh file in a
        # private folder (never a predictable name in /tmp), removed when the monitor ends.
        try:
            fd, log_path = private_log("command")
        except OSError as exc:
            print(f"adaptyst-top: no place for the command's output: {exc}", file=sys.stderr)
            return 1
        opts.child_stdout = opts.child_stderr = fd
        opts.command_log = str(log_path)
    app: Any = None

    def on_signal(signum: int, _frame: object) -> None:
        # Before the screen is up: give up attaching (the command never runs). After: quit
        # like q (a closed SSH session is SIGHUP): probes detach, the command is ended.
        opts.cancel.set()
        if app is not None:
            app.exit()

    for sig in QUIT_SIGNALS:
        signal.signal(sig, on_signal)
    try:
        try:
            session = open_session(opts)
        finally:
            if isinstance(opts.child_stdout, int):
                os.close(opts.child_stdout)  # the child holds its own copy
        try:
            if opts.cancel.is_set():
                raise SessionError("interrupted before the command started")
            session.start()
            app = MonitorApp(
                LiveSource(session), interval=interval, config=config, ascii=args.ascii
            )
            app.run()
        finally:
            # The app's loop took the signals while it ran and gave back the default
            # actions as it closed: a SIGTERM now would end us with the command running.
            for sig in QUIT_SIGNALS:
                signal.signal(sig, on_signal)
            session.close()
    except SessionError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return exc.status
    finally:
        if log_path is not None:
            _tell_and_remove(log_path, command)
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
    return run_monitor(monitor_parser().parse_args(argv), command)


def cmd_replay(argv: Sequence[str]) -> int:
    from adaptyst_top.runtime.sources import ReplaySource, check_recording
    from adaptyst_top.tui.app import MonitorApp

    args = replay_parser().parse_args(argv)
    try:
        check_recording(args.file)
    except (OSError, ValueError) as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return 1
    config = load_config_or_exit(args)
    if config is None:
        return 1
    source = ReplaySource(args.file)
    try:
        app = MonitorApp(
            source, interval=args.interval, config=config, ascii=args.ascii, speed=args.speed
        )
        for sig in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal quits like q
            signal.signal(sig, lambda *_: app.exit())
        app.run()
    finally:
        source.close()
    return 0


def _ensure_standard_fds() -> None:
    """Started with 0, 1 or 2 closed (`2>&-`), the next file we open would take that
    number and a launched command's output could land in the JSON stream: each closed
    one is pointed at /dev/null first, and Python's stream for it too."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            os.set_inheritable(fd, True)  # a standard descriptor, passed to what we run
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115


def main(argv: Sequence[str] | None = None) -> int:
    # Ctrl-C ends a command that has not installed its own handling (list, doctor) the
    # way it ends a C tool: at once, without a Python traceback. record and the monitor
    # install theirs before they hold a command or attach a probe.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    _ensure_standard_fds()
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        # `adaptyst-top list ... | head`: the reader left. Like any Unix tool, stop quietly
        # (probes were detached as the exception unwound); no traceback at exit either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _dispatch(argv: list[str]) -> int:
    # A monitor refreshed once a second needs no 60 frames a second; over SSH fewer
    # frames are fewer bytes. Read by Textual when it loads (set before any import).
    os.environ.setdefault("TEXTUAL_FPS", "20")
    if argv and argv[0] == "doctor":
        return cmd_doctor(argv[1:])
    if argv and argv[0] == "replay":
        return cmd_replay(argv[1:])
    if argv and argv[0] == "cluster":
        from adaptyst_top.tui.cli_cluster import cmd_cluster

        return cmd_cluster(argv[1:])
    if argv and argv[0] == "export":
        from adaptyst_top.tui.cli_record import cmd_export

        return cmd_export(argv[1:])
    if argv and argv[0] == "list":
        from adaptyst_top.tui.cli_list import cmd_list

        return cmd_list(argv[1:])
    if argv and argv[0] == "agent":
        from adaptyst_top.tui.cli_agent import cmd_agent

        return cmd_agent(argv[1:])
    if argv and argv[0] == "bridge":
        from adaptyst_top.tui.cli_agent import cmd_bridge

        return cmd_bridge(argv[1:])
    opts, maybe_command = split_command(argv[1:] if argv and argv[0] in SUBCOMMANDS else argv)
    if maybe_command == []:
        # A bare `--` would otherwise watch the whole node, which is not what was asked.
        print("adaptyst-top: nothing after --: give the command to run", file=sys.stderr)
        return 2
    command = maybe_command or []
    if argv and argv[0] == "record":
        from adaptyst_top.tui.cli_record import cmd_record

        return cmd_record(opts, command)
    if argv and argv[0] == "demo":
        from adaptyst_top.tui.cli_demo import cmd_demo

        return cmd_demo(opts, command)
    return cmd_monitor(opts, command)


if __name__ == "__main__":
    sys.exit(main())
