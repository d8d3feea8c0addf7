"""The task API's USDT sites on 5-byte nops: every USDT reader still finds them, the
kernel turns a probe there into a call where it can (the site's bytes in the process say
so), the counts stay exact, and the site is a nop again once the probes are gone."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.engine.attach_plan import site_code
from adaptyst_top.placement.task_api import PROBE_BINARY
from tests.support.paths import TARGETS


def sites() -> dict[str, int]:
    """Each task probe's site: its file offset in the extension."""
    elf = read_elf(PROBE_BINARY)
    out = {}
    for p in elf.usdt:
        if p.provider == "adaptyst":
            assert site_code(str(PROBE_BINARY), elf, p) == ov.NOP5, p
            offset = elf.offset_of(p.address)
            assert offset is not None
            out[p.name] = offset
    return out


def test_the_sites_are_5_byte_nops_that_every_usdt_reader_finds() -> None:
    assert set(sites()) == {"task_begin", "task_end"}
    notes = subprocess.run(
        ["readelf", "-n", str(PROBE_BINARY)], capture_output=True, text=True, check=True
    ).stdout
    assert "Name: task_begin" in notes and "Name: task_end" in notes
    listed = subprocess.run(
        ["bpftrace", "-l", f"usdt:{PROBE_BINARY}:*"], capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert {line.rsplit(":", 1)[-1] for line in listed.stdout.split()} >= {
        "task_begin",
        "task_end",
    }


@pytest.mark.skipif(platform.machine() != "x86_64", reason="sites are decoded on x86-64 only")
def test_a_note_that_points_inside_an_instruction_is_refused(tmp_path: Path) -> None:
    """A USDT note whose site is the middle of a movabs (0x11b3 in a hostile tester's
    binary): probed, the kernel's breakpoint byte lands inside the constant and the
    target computes another sum. Refused in one line; the real site beside it plans."""
    from adaptyst_top.collectors.probes.engine.attach_plan import PlanError, plan_usdt
    from adaptyst_top.collectors.probes.kinds import parse_spec

    binary = tmp_path / "bad_site"
    source = TARGETS / "bad_site.c"
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(source)], check=True)
    elf = read_elf(str(binary))
    with pytest.raises(
        PlanError, match=r"bad:inside at 0x[0-9a-f]+ is not probed: its site is not a nop"
    ):
        plan_usdt(parse_spec(f"usdt:{binary}:bad:inside"), str(binary), elf, 10)
    assert plan_usdt(parse_spec(f"usdt:{binary}:bad:good"), str(binary), elf, 10).names == ["good"]
