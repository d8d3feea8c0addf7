"""Names as the source spells them: C++, Rust (legacy and v0, symbols rustc made) and
gfortran module procedures; compiler suffixes apart, `.cold` parts never probed; specs
on demangled names; with real eBPF, exact counts on a C++ method called from 4 threads,
a template, an overload, and a Fortran module procedure."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from tests.support.bpf_objects import none_left
from tests.support.marks import requires_root
from tests.support.paths import TARGETS


def build(tmp: Path, source: str) -> Path:
    binary = tmp / Path(source).stem
    src = TARGETS / source
    cmd = (
        ["g++", "-O2", "-pthread", "-o", str(binary), str(src)]
        if source.endswith(".cpp")
        else ["gfortran", "-O1", "-fno-inline", f"-J{tmp}", "-o", str(binary), str(src)]
    )
    subprocess.run(cmd, check=True)
    return binary


def count(engine: ProbeEngine) -> dict[str, int]:
    engine.read()
    return {e.name: e.count for e in engine.snapshot_rows()}


@pytest.mark.ebpf
@requires_root
def test_cpp_methods_from_four_threads_counted_exactly(tmp_path: Path) -> None:
    binary = build(tmp_path, "solver.cpp")
    proc = subprocess.Popen(
        [str(binary), "4", "2500"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with ProbeEngine(pid=proc.pid) as engine:
            groups = [
                engine.add(f"uprobe:{binary}:solver::Kernel::step*"),
                engine.add(f"uprobe:{binary}:solver::twice<double>*"),
                engine.add(f'uprobe:{binary}:"solver::name(char const*)"'),
            ]
            assert engine.wait(120)
            assert all(g.state == "attached" for g in groups), [g.error for g in groups]
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "ok"
            assert count(engine) == {
                "solver::Kernel::step(int)": 10_000,
                "double solver::twice<double>(double)": 10_000,
                "solver::name(char const*)": 4,
            }
        argv = ["list", "--binary", str(binary), "--functions", "--json", "solver::*"]
        listed = subprocess.run(
            [sys.executable, "-m", "adaptyst_top.cli.start", *argv],
            capture_output=True,
            text=True,
            check=True,
        )
        names = {
            f["name"]: f.get("symbol")
            for o in json.loads(listed.stdout)["objects"]
            for f in o["functions"]
        }
        assert names["solver::Kernel::step(int)"] == "_ZN6solver6Kernel4stepEi"
        assert "solver::name(int)" in names
    finally:
        proc.kill()
        proc.wait()
    assert none_left()


def probe_and_count(binary: Path, spec: str, line: str) -> tuple[list[str], dict[str, int]]:
    """BINARY (a target that says "ready", runs what a LINE asks, says "ok") probed by
    SPEC: the rows' names, and each row's count after that LINE."""
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with ProbeEngine(pid=proc.pid) as engine:
            group = engine.add(spec)
            assert engine.wait(120) and group.state == "attached", group.error
            assert proc.stdin is not None
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "ok"
            names, counts = [r.name for r in group.rows], count(engine)
    finally:
        proc.kill()
        proc.wait()
    assert none_left()
    return names, counts


@pytest.mark.ebpf
@requires_root
def test_a_fortran_module_procedure_by_its_source_name(tmp_path: Path) -> None:
    binary = build(tmp_path, "fmodule.f90")
    _, counts = probe_and_count(binary, f"uprobe:{binary}:physics::advance", "3000")
    assert counts == {"physics::advance": 3000}


@pytest.mark.ebpf
@requires_root
@pytest.mark.skipif(shutil.which("rustc") is None, reason="scripts/setup.sh installs rustc")
@pytest.mark.parametrize("mangling", ["legacy", "v0"])
def test_a_rust_function_by_its_source_name(tmp_path: Path, mangling: str) -> None:
    binary = tmp_path / f"rs_{mangling}"
    # The crate is "rs"; legacy is rustc's default mangling, v0 the one asked for.
    flags = ["-C", "symbol-mangling-version=v0"] if mangling == "v0" else []
    src = TARGETS / "rs_solver.rs"
    subprocess.run(
        ["rustc", "-O", "--crate-name", "rs", *flags, "-o", str(binary), str(src)], check=True
    )
    names, counts = probe_and_count(binary, f"uprobe:{binary}:rs::solver::*", "step 4321")
    assert names == ["rs::solver::step"]
    assert counts == {"rs::solver::step": 4321}
