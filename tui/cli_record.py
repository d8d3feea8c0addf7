"""`adaptyst-top record`: headless, one JSON snapshot per line per interval."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from adaptyst_top.tui.cli_common import add_session_options, add_version, session_options
from adaptyst_top.tui.session import SessionError, child_output_for, open_session


def record_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="adaptyst-top record",
        usage="adaptyst-top record [--pid PID] [--probe SPEC]... [--interval S] [--duration S] "
        "[--out FILE|-] [-- CMD ARGS...]",
        description="Headless monitor: one JSON snapshot per line per interval. With -- CMD, "
        "probes attach before CMD starts, a final snapshot is written when it exits, and the "
        "exit status is CMD's. CMD's stdout goes to stderr when the snapshots go to stdout.",
    )
    add_version(p)
    add_session_options(p)
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.add_argument("--out", default="-", metavar="FILE|-", help="where to write (- = stdout)")
    return p


def cmd_record(argv: Sequence[str], command: Sequence[str]) -> int:
    args = record_parser().parse_args(argv)
    to_stdout = args.out == "-"
    try:
        out: IO[str] = sys.stdout if to_stdout else open(args.out, "w")  # noqa: SIM115
    except OSError as exc:
        print(f"adaptyst-top: cannot write {args.out}: {exc.strerror}", file=sys.stderr)
        return 1
    opts = session_options(args, command)
    opts.child_stdout = child_output_for(to_stdout)
    try:
        session = open_session(opts)
    except SessionError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return 1

    stop = threading.Event()
    caught: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        caught.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)

    child = session.child
    if child is not None:
        child.release()
    start = time.monotonic()
    next_tick = start
    status = 0
    try:
        while True:
            next_tick += args.interval
            while not stop.is_set() and time.monotonic() < next_tick:
                if child is not None and child.poll() is not None:
                    break
                stop.wait(min(0.05, max(0.0, next_tick - time.monotonic())))
            exited = child is not None and child.poll() is not None
            snap = session.snapshot()
            if exited:
                snap["final"] = True
            out.write(json.dumps(snap) + "\n")
            out.flush()
            if exited:
                assert child is not None
                status = child.proc.returncode
                status = 128 - status if status < 0 else status  # killed by a signal
                break
            if stop.is_set():
                if child is not None:
                    child.kill()
                    status = 128 + caught[0]
                break
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            if session.engine is not None and session.engine.target_ended:
                break
    except BrokenPipeError:
        status = 0  # a reader like `head` went away: not an error
    finally:
        session.close()
        if out is not sys.stdout:
            out.close()
    return status
