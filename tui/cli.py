"""The `adaptyst-top` command line: the TUI by default, and its subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from adaptyst_top.collectors.version import package_version

SUBCOMMANDS = ("demo", "record", "list", "doctor", "replay")

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

`adaptyst-top SUBCOMMAND --help` tells more.
"""


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Options before `--`, the command to launch after it."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def add_target_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pid", type=int, help="process to probe and follow")
    parser.add_argument(
        "--probe",
        action="append",
        default=[],
        metavar="SPEC",
        help="uprobe:TARGET:FUNC | usdt:TARGET:PROVIDER:NAME[..END][@argN] (repeatable)",
    )
    parser.add_argument(
        "--interval", type=positive_float, default=1.0, metavar="S", help="refresh (1.0)"
    )


def monitor_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="adaptyst-top",
        usage="adaptyst-top [--pid PID] [--probe SPEC]... [--interval S] [-- CMD ARGS...]\n"
        "       adaptyst-top {demo,record,list,doctor,replay} ...",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _version(p)
    add_target_options(p)
    return p


def doctor_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="adaptyst-top doctor",
        description="Check each capability: ebpf, nvml, rapl, amd-gpu, opencl, fpga. "
        "Exit status 0 when the monitor can run at all.",
    )
    _version(p)
    p.add_argument("--json", action="store_true", help="one JSON array on stdout")
    p.add_argument(
        "--no-smoke", action="store_true", help="skip the one-probe eBPF smoke test (~1 s)"
    )
    return p


def demo_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="adaptyst-top demo",
        description="The demo workload with its probes and the placement advisor.",
    )
    _version(p)
    p.add_argument("--interval", type=positive_float, default=1.0, metavar="S")
    return p


def cmd_doctor(argv: Sequence[str]) -> int:
    from adaptyst_top.collectors.doctor import can_run, run_doctor

    args = doctor_parser().parse_args(argv)
    caps = run_doctor(run_smoke=not args.no_smoke)
    if args.json:
        print(json.dumps([c.to_json() for c in caps], indent=None))
    else:
        width = max(len(c.name) for c in caps)
        for c in caps:
            fix = f"  fix: {c.fix}" if c.fix and c.status != "ok" else ""
            print(f"{c.name:<{width}}  {c.status:<8}  {c.detail}{fix}")
    return 0 if can_run(caps) else 1


def cmd_monitor(argv: Sequence[str]) -> int:
    opts, _command = split_command(argv)  # launching CMD comes with the probe engine
    args = monitor_parser().parse_args(opts)
    from adaptyst_top.tui.app import MonitorApp

    MonitorApp(interval=args.interval, pid=args.pid).run()
    return 0


def cmd_demo(argv: Sequence[str]) -> int:
    args = demo_parser().parse_args(argv)
    from adaptyst_top.tui.app import MonitorApp

    MonitorApp(interval=args.interval, pid=None).run()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    handlers = {"doctor": cmd_doctor, "demo": cmd_demo}
    if argv and argv[0] in handlers:
        return handlers[argv[0]](argv[1:])
    if argv and argv[0] in SUBCOMMANDS:
        print(f"adaptyst-top: `{argv[0]}` is not built yet in this version", file=sys.stderr)
        return 2
    return cmd_monitor(argv)


if __name__ == "__main__":
    sys.exit(main())
