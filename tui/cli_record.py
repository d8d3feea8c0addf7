"""`adaptyst-top record`: headless, one JSON snapshot per line per interval."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Sequence
from typing import IO, Any

from adaptyst_top.runtime.limits import DEFAULT_INTERVAL, DURATION_RANGE
from adaptyst_top.runtime.record import record_snapshots
from adaptyst_top.runtime.record_file import open_output
from adaptyst_top.runtime.session import SessionError, child_output_for, open_session
from adaptyst_top.tui.cli_common import (
    Parser,
    add_session_options,
    add_version,
    bounded_float,
    session_options,
)


def record_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top record",
        usage="adaptyst-top record [--pid PID | --job ID] [--probe SPEC]... [--interval S] [--duration S] "
        "[--out FILE|-] [-- CMD ARGS...]",
        description="Headless monitor: one JSON snapshot per line per interval. With -- CMD, "
        "probes attach before CMD starts, a final snapshot is written when it exits, and the "
        "exit status is CMD's. CMD's stdout goes to stderr when the snapshots go to stdout.",
    )
    add_version(p)
    add_session_options(p)
    p.add_argument(
        "--duration",
        type=bounded_float(*DURATION_RANGE),
        metavar="S",
        help="stop after S seconds (on time, whatever the interval), ending the command",
    )
    p.add_argument(
        "--out",
        default="-",
        metavar="FILE|-",
        help="where to write (- = stdout); a name ending in .zst is zstd-compressed (~25x), "
        "flushed every interval",
    )
    return p


def cmd_record(argv: Sequence[str], command: Sequence[str]) -> int:
    args = record_parser().parse_args(argv)
    to_stdout = args.out == "-"
    try:
        out: IO[str] = sys.stdout if to_stdout else open_output(args.out)
    except OSError as exc:
        print(f"adaptyst-top: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    opts = session_options(args, command)
    opts.child_stdout = child_output_for(to_stdout)
    caught: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        caught.append(signum)
        opts.cancel.set()  # also gives up an attach still under way

    # Installed before attaching: a signal then must not release a command with no probes.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        session = open_session(opts)
        if caught:
            session.close()
            raise SessionError("interrupted before the command started")
        session.start()
    except SessionError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        if out is not sys.stdout:
            out.close()
        return exc.status
    try:
        interval = DEFAULT_INTERVAL if args.interval is None else args.interval
        return record_snapshots(session, out, interval, args.duration, opts.cancel)
    except BrokenPipeError:
        return 0  # a reader like `head` went away: not an error (the command is ended)
    except OSError as exc:
        print(f"adaptyst-top: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        session.close()
        if out is not sys.stdout:
            with contextlib.suppress(OSError):
                out.close()
