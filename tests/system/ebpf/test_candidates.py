"""What the add-probe picker offers for a running process: the functions of the
executable and of every library it maps, and their USDT probes; names as the source
spells them, and the functions whose probe would be refused marked with why."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

from adaptyst_top.collectors.probes.safety.entry_safety import EntryPolicy
from adaptyst_top.runtime.listing import candidates
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.runtime.sources import LiveSource
from adaptyst_top.system.targets import mapped_files
from tests.system.ebpf.test_demangle import build


def test_the_picker_offers_the_libraries_a_process_maps() -> None:
    # A Python interpreter maps libc, libm and the rest; its own binary comes first.
    # It says when it runs its code: every library it links is mapped by then (three
    # mapped files were not enough under load: libc was not yet among them).
    code = "import time; print('ready', flush=True); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        files = mapped_files(proc.pid)
        session = types.SimpleNamespace(
            remote=None, pid=proc.pid, child=None, options=SessionOptions()
        )
        found = list(LiveSource(session).candidates())  # type: ignore[arg-type]
        specs = [c.spec for c in found]
        libc = next(f for f in files if "/libc.so" in f or "/libc-" in f)
        assert f"uprobe:{libc}:malloc" in specs
        by_spec = {c.spec: c for c in found}
        assert by_spec[f"uprobe:{libc}:malloc"].refused is None
        # x87 first instruction: refused on any machine, with why.
        assert "single-step" in (by_spec[f"uprobe:{libc}:copysignl"].refused or "")
        # Every mapped object contributes; the executable's own come first.
        paths = {s.split(":", 2)[1] for s in specs if s.startswith("uprobe:")}
        assert libc in paths and len(paths) >= 2
        first = {p: min(i for i, s in enumerate(specs) if s.split(":", 2)[1] == p) for p in paths}
        assert files[0] not in first or first[files[0]] == min(first.values())
    finally:
        proc.kill()
        proc.wait()


def test_cpp_names_read_as_the_source_spells_them(tmp_path: Path) -> None:
    binary = build(tmp_path, "solver.cpp")
    found = candidates([str(binary)], None, EntryPolicy({}))
    step = next(c for c in found if c.label.endswith(":solver::Kernel::step(int)"))
    assert step.spec.startswith(f"uprobe:{binary}:_ZN6solver6Kernel4step")  # always parses
    assert not [c for c in found if ".cold" in c.spec]  # a split-off branch is not offered
