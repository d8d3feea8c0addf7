"""`adaptyst-top record`: headless, one JSON snapshot per line per interval."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

from adaptyst_top.cli.options import (
    Parser,
    add_session_options,
    add_version,
    bounded_float,
    check_session_args,
    session_options,
)
from adaptyst_top.runtime.limits import DEFAULT_INTERVAL, DURATION_RANGE
from adaptyst_top.runtime.record import WriteInterrupted, record_snapshots
from adaptyst_top.runtime.record_file import open_output, replaced_output, same_file
from adaptyst_top.runtime.run_lifecycle import RunLifecycle, once
from adaptyst_top.runtime.session import Session, SessionError, child_output_for, open_session


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
        help="where to write (- = stdout); a name ending in .zst is zstd-compressed, "
        "flushed every interval",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="record even when the kernel refused some probes (another tool may hold the "
        "function); by default record says which and exits 1 without running CMD",
    )
    p.add_argument(
        "--format",
        choices=("full", "compact"),
        help="full: every line whole (for jq); compact: each line only what changed since "
        "the last (`replay` reads it, `export` makes it full). Default: compact for .zst, "
        "else full",
    )
    return p


def cmd_record(argv: Sequence[str], command: Sequence[str]) -> int:
    parser = record_parser()
    args = parser.parse_args(argv)
    check_session_args(parser, args)
    to_stdout = args.out == "-"
    try:
        out: IO[str] = sys.stdout if to_stdout else open_output(args.out)
    except OSError as exc:
        print(f"adaptyst-top: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    # An agent that does not attach the probes within the whole run ends it.
    give_up_at = None if args.duration is None else time.monotonic() + args.duration
    opts = session_options(args, command, child_output_for(to_stdout), give_up_at)
    writing = threading.Event()
    main_thread = threading.get_ident()

    def on_quit(signum: int) -> None:
        if writing.is_set():
            raise WriteInterrupted  # out of a write a reader may never take
        if len(life.caught) == 1:
            # The last line is still to come, and may meet a reader that does not read:
            # asked again in a second, a write blocked by then is left.
            again = threading.Timer(1.0, signal.pthread_kill, (main_thread, signum))
            again.daemon = True
            again.start()

    life = RunLifecycle(opts.cancel, on_quit)
    life.install()
    try:
        session = open_session(opts)
        if life.caught:
            session.close()
            raise SessionError("interrupted before the command started")
        refused = kernel_refusals(session)
        for line in refused:
            print(f"adaptyst-top: {line}", file=sys.stderr)
        if refused and not args.keep_going:
            session.close()
            what = "running the command" if command else "recording"
            raise SessionError(f"not {what} with probes the kernel refused (--keep-going does)")
        session.start()
        close = once(session.close)  # the main thread's, or the quit deadline's
        life.last_resort(close)
    except SessionError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        if out is not sys.stdout:
            out.close()
        return exc.status
    try:
        interval = DEFAULT_INTERVAL if args.interval is None else args.interval
        compact = (args.format or ("compact" if args.out.endswith(".zst") else "full")) == "compact"
        # Only a pipe (or a terminal) can block a write for ever; a file is written whole.
        may_block = to_stdout and not stat.S_ISREG(os.fstat(sys.stdout.fileno()).st_mode)
        return record_snapshots(
            session,
            out,
            interval,
            args.duration,
            opts.cancel,
            compact,
            writing if may_block else None,
        )
    except WriteInterrupted:
        # What is still buffered would block the exit the same way: it goes nowhere.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
        status = session.end_command()
        return 0 if status is None or session.options.target.keep_command else status
    except BrokenPipeError:
        return 0  # a reader like `head` went away: not an error (the command is ended)
    except OSError as exc:
        print(f"adaptyst-top: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        close()
        if out is not sys.stdout:
            with contextlib.suppress(OSError):
                out.close()


def kernel_refusals(session: Session) -> list[str]:
    """What the kernel refused (uprobe_multi.kernel_refusals), from the engine's rows, not
    a snapshot (an agent's session would lose its first one); through an agent, as its
    answer to the open said."""
    if session.engine is not None:
        from adaptyst_top.collectors.probes.engine.uprobe_multi import (
            kernel_refusals as refused_rows,
        )

        return refused_rows(session.engine.rows.values())
    return list(session.remote.refused) if session.remote is not None else []


def export_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top export",
        usage="adaptyst-top export FILE [--folded [--off]] [--out FILE|-]",
        description="A recording (full or compact, plain or .zst) as full JSON lines, one "
        "snapshot per line as `record --format full` writes them: for jq and other tools. "
        "With --folded, its profile (record --profile) as folded stacks for flamegraph.pl "
        "and speedscope.",
    )
    add_version(p)
    p.add_argument("file", metavar="FILE", help="what `record` wrote")
    p.add_argument(
        "--folded",
        action="store_true",
        help="the profile's stacks, `outer;inner;leaf COUNT` a line: on-CPU samples",
    )
    p.add_argument(
        "--off",
        action="store_true",
        help="with --folded: off-CPU ns instead (blocked and preempted)",
    )
    p.add_argument("--out", default="-", metavar="FILE|-", help="where to write (- = stdout)")
    return p


def cmd_export(argv: Sequence[str]) -> int:
    from adaptyst_top.runtime.sources import check_recording, export_folded, export_recording

    parser = export_parser()
    args = parser.parse_args(argv)
    if args.off and not args.folded:
        parser.error("--off goes with --folded")
    try:
        check_recording(args.file)
        if args.out != "-" and same_file(args.file, args.out):
            raise ValueError(f"{args.out}: that is the recording itself; export to another file")
    except (OSError, ValueError) as exc:
        print(f"adaptyst-top: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 1
    out = contextlib.nullcontext(sys.stdout) if args.out == "-" else replaced_output(args.out)
    try:
        with out as f:
            if args.folded:
                written, skipped, damage = export_folded(args.file, f, args.off)
            else:
                written, skipped, damage = export_recording(args.file, f)
            if not written:
                raise ValueError("no snapshot in it")  # what was at --out stays
    except BrokenPipeError:
        return 0
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        print(f"adaptyst-top: cannot export {args.file} to {args.out}: {why}", file=sys.stderr)
        return 1
    if skipped:
        print(f"adaptyst-top: skipped {skipped} malformed line(s) of {args.file}", file=sys.stderr)
    if damage:
        print(f"adaptyst-top: {damage}", file=sys.stderr)
    return 1 if damage else 0
