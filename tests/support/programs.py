"""Test programs built from tests/support/targets/ for tests in more than one folder."""

import subprocess
from pathlib import Path

from tests.support.paths import TARGETS
from tests.support.workload import build_c

ESCAPES = TARGETS / "escapes.c"
KEYS = TARGETS / "keys.c"
EVIL = "evil\x1b]0;pwned\x07\x1b[2J"  # a symbol that would retitle and clear a terminal


def build_escapes(directory: Path) -> Path:
    """escapes.c with its function `evil` renamed to EVIL, escape sequences and all."""
    obj, out = directory / "escapes.o", directory / "escapes"
    subprocess.run(["gcc", "-O1", "-c", "-o", obj, ESCAPES], check=True)
    subprocess.run(["objcopy", f"--redefine-sym=evil={EVIL}", obj], check=True)
    subprocess.run(["gcc", "-o", out, obj], check=True)
    return out


def build_keys(directory: Path) -> Path:
    # A PIE whatever gcc's default here: loaded anywhere, as the bias tests need.
    return build_c(KEYS, directory, "-O1", "-fPIE", "-pie")
