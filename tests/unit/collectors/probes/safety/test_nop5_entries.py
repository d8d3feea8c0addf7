"""Function entries on a 5-byte nop (gcc -pg -mfentry -mnop-mcount, and behind an endbr64
with -fcf-protection): classified `uprobe-optimized` where the kernel turns a probe there
into a call, probed on the nop (past the endbr64), shown by `list`; counts stay exact with
several threads calling at the highest rate, and the nop is back once the probes go."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.cost.calibration import build_calibrator
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.engine.attach_plan import plan_function
from tests.support.cli import CLI


def test_entry_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ov, "kernel_optimizes_uprobes", lambda: True)
    assert ov.classify_entry(ov.NOP5 + b"\xc3", offset=0x1140) == ov.UPROBE_OPTIMIZED
    # The kernel patches 5 bytes in one page only; unknown offset: not claimed.
    assert ov.classify_entry(ov.NOP5, offset=4096 - 5) == ov.UPROBE_OPTIMIZED
    # Not turned into a call, a nopl is single-stepped (Linux 6.18 emulates the one-byte
    # nop only: a 4-byte nopl cost 11.7 us inside the interval here, 0x90 0.5 us).
    assert ov.classify_entry(ov.NOP5, offset=4096 - 4) == ov.SINGLESTEP
    assert ov.classify_entry(ov.NOP5) == ov.SINGLESTEP
    assert ov.classify_entry(b"\x90" * 5, offset=0x1140) == ov.EMULATED  # 5 one-byte nops
    assert ov.entry_skip(ov.ENDBR64 + ov.NOP5, 0x1140) == 4
    assert ov.entry_skip(ov.ENDBR64 + b"\x55", 0x1140) == 0
    monkeypatch.setattr(ov, "kernel_optimizes_uprobes", lambda: False)
    assert ov.classify_entry(ov.NOP5, offset=0x1140) == ov.SINGLESTEP
    assert ov.entry_skip(ov.ENDBR64 + ov.NOP5, 0x1140) == 0


@pytest.mark.parametrize("optimizes", [True, False])
def test_planned_on_the_nop_past_an_endbr64(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, optimizes: bool
) -> None:
    monkeypatch.setattr(ov, "kernel_optimizes_uprobes", lambda: optimizes)
    binary = build_calibrator(tmp_path)
    elf = read_elf(binary)
    fn = {f.name: f for f in elf.functions}
    fast = ov.UPROBE_OPTIMIZED if optimizes else ov.SINGLESTEP  # nop5; ret: no place past it
    nop5 = plan_function(str(binary), elf, fn["cal_nop5"], lambda _i: None)
    assert (nop5.cost_class, nop5.sym, nop5.offset) == (
        fast,
        "cal_nop5",
        fn["cal_nop5"].file_offset,
    )
    behind = plan_function(str(binary), elf, fn["cal_endbr_nop5"], lambda _i: None)
    entry = fn["cal_endbr_nop5"]
    if fast == ov.UPROBE_OPTIMIZED:
        assert entry.file_offset is not None
        assert (behind.cost_class, behind.sym, behind.addr) == (fast, "", entry.address + 4)
        assert behind.offset == entry.file_offset + 4 and behind.entry.startswith("endbr64; nop")
    else:
        assert behind.cost_class == ov.SINGLESTEP and behind.sym == "cal_endbr_nop5"


def test_list_says_which_functions_qualify(workload_bin: Path) -> None:
    out = subprocess.run(
        [*CLI, "list", "--binary", str(workload_bin), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    funcs = {f["name"]: f for f in json.loads(out.stdout)["objects"][0]["functions"]}
    optimizes = ov.kernel_optimizes_uprobes()
    slow = (ov.SINGLESTEP, ov.SINGLESTEP_RETIMED)
    assert funcs["nop5_entry"]["cost_class"] in ((ov.UPROBE_OPTIMIZED,) if optimizes else slow)
    assert funcs["fast_fn"]["cost_class"] != ov.UPROBE_OPTIMIZED
    text = subprocess.run(
        [*CLI, "list", "--binary", str(workload_bin), "*"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    marked = {line.split()[1] for line in text.splitlines() if line.endswith("  optimized")}
    assert marked == ({"nop5_entry", "held_nop"} if optimizes else set())
