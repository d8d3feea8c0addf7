"""The command line as tests run it: this interpreter's, whatever is on PATH."""

import sys

CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]
