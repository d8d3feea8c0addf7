"""The program's main: the standard descriptors made safe, then the subcommand named
in the table (commands.py) or the monitor."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import cast

from adaptyst_top.cli.commands import BY_NAME, Command


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Options before `--`, the command to launch after it (None: no `--` at all)."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, None


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
    command = BY_NAME.get(argv[0]) if argv else None
    if command is not None and not command.takes_command:
        run = cast(Callable[[Sequence[str]], int], _function(command))
        return run(argv[1:])
    opts, maybe_command = split_command(argv[1:] if command is not None else argv)
    if maybe_command == []:
        # A bare `--` would otherwise watch the whole node, which is not what was asked.
        print("adaptyst-top: nothing after --: give the command to run", file=sys.stderr)
        return 2
    if command is None:
        from adaptyst_top.cli.monitor import cmd_monitor

        return cmd_monitor(opts, maybe_command or [])
    launch = cast(Callable[[Sequence[str], Sequence[str]], int], _function(command))
    return launch(opts, maybe_command or [])


def _function(command: Command) -> object:
    """The table's function for COMMAND, its module imported only now."""
    return getattr(importlib.import_module(f"adaptyst_top.cli.{command.module}"), command.function)


if __name__ == "__main__":
    sys.exit(main())
