"""What a wheel holds: every module and data file the tree has (an editable install
finds them in the tree, so nothing else would notice one missing)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "adaptyst_top"
DATA = ("*.py", "*.tcss", "*.h", "*.f90", "*.c", "py.typed")


def test_the_wheel_holds_every_module_and_data_file(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("adaptyst_top-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"adaptyst_top/{f.relative_to(PACKAGE).as_posix()}"
        for pattern in DATA
        for f in PACKAGE.rglob(pattern)
        if "__pycache__" not in f.parts
    }
    assert expected - names == set()
