"""Where the repository's files are, wherever the test that asks sits."""

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parent.parent
TARGETS = SUPPORT / "targets"  # the programs tests build and probe
DATA = SUPPORT / "data"  # recordings the tests read
