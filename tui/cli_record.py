"""`adaptyst-top record`: headless, one JSON snapshot per line per interval."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from adaptyst_top.tui.cli_common import (
    Parser,
    add_session_options,
    add_version,
    bounded_float,
    session_options,
)
from adaptyst_top.tui.limits import DEFAULT_INTERVAL, DURATION_RANGE
from adaptyst_top.tui.session import Session, SessionError, child_output_for, open_session


def record_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top record",
        usage="adaptyst-top record [--pid PID] [--probe SPEC]... [--interval S] [--duration S] "
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
    p.add_argument("--out", default="-", metavar="FILE|-", help="where to write (- = stdout)")
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
        return _record(session, out, interval, args.duration, opts.cancel)
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


def _record(
    session: Session,
    out: IO[str],
    interval: float,
    duration: float | None,
    stop: threading.Event,
) -> int:
    """Snapshots until the command exits, a signal, the duration, or the target's end;
    the status: the command's (ended by us or not), else 0."""
    child = session.child
    start = time.monotonic()
    end = None if duration is None else start + duration
    next_tick = start
    while True:
        next_tick += interval
        # The duration ends the run on time whatever the interval: a last, shorter tick.
        tick_end = next_tick if end is None else min(next_tick, end)
        while not stop.is_set() and time.monotonic() < tick_end:
            if child is not None and child.poll() is not None:
                break
            stop.wait(min(0.05, max(0.0, tick_end - time.monotonic())))
        exited = child is not None and child.poll() is not None
        timed_out = end is not None and time.monotonic() >= end
        snap = session.snapshot()
        if exited or timed_out or stop.is_set():
            snap["final"] = True
        out.write(json.dumps(snap) + "\n")
        out.flush()
        if exited:
            assert child is not None
            return child.status or 0
        if stop.is_set() or timed_out:
            status = session.end_command()
            return 0 if status is None or session.keep_command else status
        if session.engine is not None and session.engine.target_ended:
            return 0


def open_output(path: str) -> IO[str]:
    """The record file. In a folder others may write to (/tmp), a symlink planted at
    PATH is refused rather than followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    parent = os.path.dirname(os.path.abspath(path))
    with contextlib.suppress(OSError):
        if os.stat(parent).st_mode & 0o002:
            flags |= os.O_NOFOLLOW
    return os.fdopen(os.open(path, flags, 0o644), "w")
