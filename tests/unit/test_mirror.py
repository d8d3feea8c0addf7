"""tests/unit/ mirrors src/: a folder of tests is a package's, and a test named after a
module (test_X.py for X.py or the package X) sits in that module's folder, so a
module's tests are found from its path."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "adaptyst_top"
UNIT = REPO / "tests" / "unit"
# Folders of tests that are no package's: the whole app driven through Textual's Pilot
# (its snapshots beside it), and the experiments' own tests (experiments/, not src/).
NOT_PACKAGES = {"tui/pilot", "experiments"}


def _homes() -> dict[str, set[str]]:
    """Each module or package name, and the folders (relative to src) it is found in."""
    out: dict[str, set[str]] = defaultdict(set)
    for p in SRC.rglob("*.py"):
        rel = p.relative_to(SRC)
        if p.name == "__init__.py":
            out[p.parent.name].add(str(rel.parent))  # a package's tests: in it
            out[p.parent.name].add(str(rel.parent.parent))  # or beside it
        else:
            out[p.stem].add(str(rel.parent))
    return out


def test_every_folder_of_unit_tests_is_a_package() -> None:
    packages = {str(p.parent.relative_to(SRC)) for p in SRC.rglob("__init__.py")}
    folders = {str(p.parent.relative_to(UNIT)) for p in UNIT.rglob("test_*.py")}
    assert folders - packages - NOT_PACKAGES <= {"."}


def test_a_test_named_after_a_module_is_in_its_folder() -> None:
    homes = _homes()
    astray = {}
    for test in UNIT.rglob("test_*.py"):
        folder = str(test.parent.relative_to(UNIT))
        found = homes.get(test.stem.removeprefix("test_"))
        if found and folder not in found and folder not in NOT_PACKAGES:
            astray[str(test.relative_to(UNIT))] = sorted(found)
    assert astray == {}
