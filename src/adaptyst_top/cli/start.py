"""Where the `adaptyst-top` program starts: Ctrl-C is given its default effect before
anything else loads, so that an interrupt during start-up ends the program at once, as
it ends a C tool, instead of raising KeyboardInterrupt inside some import (a traceback).
main() keeps it so for the commands without handlers of their own (list, doctor);
record and the monitor install theirs before they hold a command or attach a probe."""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_DFL)  # first: imported only as the program starts

from adaptyst_top.cli.main import main  # noqa: E402 - after the line above, on purpose

if __name__ == "__main__":
    raise SystemExit(main())
