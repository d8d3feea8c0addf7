"""What a wheel holds: every module and data file the tree has (an editable install
finds them in the tree, so nothing else would notice one missing)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.paths import REPO

PACKAGE = REPO / "src" / "adaptyst_top"
DATA = ("*.py", "*.tcss", "*.h", "*.f90", "*.c", "py.typed")


def test_the_wheel_holds_every_module_and_data_file(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(tmp_path)],
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
    # Each BPF program built beside its source: what libbpf loads on the node.
    built = {n[: -len(".c")] + ".o" for n in expected if n.endswith(".bpf.c")}
    assert built and built - names == set()


def test_the_commit_hook_refuses_an_unformatted_file(tmp_path: Path) -> None:
    """scripts/pre-commit (linked by make setup): ruff on what a commit stages."""
    hook = REPO / "scripts" / "pre-commit"
    env = {**os.environ, "VENV": str(Path(sys.executable).parent.parent)}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True)

    git("init", "-q")
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "bad.py").write_text("x=[1,\n2]\n")
    git("add", "ok.py")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([hook], cwd=tmp_path, env=env, capture_output=True, text=True)

    assert run().returncode == 0
    git("add", "bad.py")
    refused = run()
    assert refused.returncode == 1 and "pre-commit: ruff" in refused.stderr
