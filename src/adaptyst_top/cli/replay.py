"""`adaptyst-top replay`: a recording played in the monitor's screens."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from adaptyst_top.cli.monitor import add_display_options, load_config_or_exit
from adaptyst_top.cli.options import Parser, add_version, bounded_float, interval_s
from adaptyst_top.runtime.limits import DEFAULT_INTERVAL, SPEED_RANGE


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


def cmd_replay(argv: Sequence[str]) -> int:
    from adaptyst_top.runtime.sources import ReplaySource, check_recording
    from adaptyst_top.tui.app import MonitorApp

    args = replay_parser().parse_args(argv)
    config = load_config_or_exit(args.config)
    if config is None:
        return 1
    try:
        check_recording(args.file)
        source = ReplaySource(args.file)  # opened again: what was checked may have changed
    except ValueError as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"adaptyst-top: {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
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
