"""A binary's call-frame tables as the profile reads them, and what a hostile table costs:
a one-line count of entries that failed, never an exception."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from adaptyst_top.collectors.profile.cfi import RSP, IndexedCfi, read_cfi
from adaptyst_top.runtime.folded import folded, folded_lines
from adaptyst_top.snapshot import ProfilePart, ProfileStack, Snapshot

BINARY = Path(shutil.which("true") or "/bin/true").resolve()


def _eh_frame(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        sec = ELFFile(f).get_section_by_name(".eh_frame")
        assert sec is not None
        return int(sec["sh_offset"]), int(sec["sh_size"])


def test_every_function_entry_has_its_return_address_at_the_stack_pointer() -> None:
    """At a function's first instruction on x86-64 the CFA is rsp + 8 and the return
    address lies at CFA - 8: what every FDE's first row says."""
    table = read_cfi(str(BINARY), eager=True)
    assert table.rules and table.errors == 0
    entries = [r for r in table.rules if r.cfa_reg == RSP and r.cfa_offset == 8]
    assert entries and all(r.ra_offset in (-8, None) for r in entries)
    for r in table.rules:
        assert r.start < r.end and table.find(r.start) is not None


def test_the_index_finds_what_the_whole_table_says() -> None:
    """Read an entry at a time through .eh_frame_hdr, the table answers each address as
    the table read whole does."""
    lazy, eager = read_cfi(str(BINARY)), read_cfi(str(BINARY), eager=True)
    assert isinstance(lazy, IndexedCfi)
    for r in eager.rules:
        assert lazy.find(r.start) == eager.find(r.start) == r
        assert lazy.find(r.end - 1) == eager.find(r.end - 1)
    assert lazy.find(0) is None and eager.find(0) is None


@pytest.mark.parametrize("seed", range(40))
def test_mutated_tables_cost_entries_never_an_exception(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    data = bytearray(BINARY.read_bytes())
    off, size = _eh_frame(BINARY)
    for _ in range(rng.randint(1, 40)):
        data[off + rng.randrange(size)] = rng.randrange(256)
    if seed % 4 == 0:
        data = data[: off + rng.randrange(size)]  # a truncated section
    bad = tmp_path / "bad"
    bad.write_bytes(bytes(data))
    eager = read_cfi(str(bad), eager=True)  # never raises
    for r in eager.rules[:200]:
        assert eager.find(r.start) is not None
    lazy = read_cfi(str(bad))
    for vaddr in range(0, 0x20000, 97):
        lazy.find(vaddr)  # never raises: a bad entry is an error counted, and no rule


def test_not_an_elf_file_is_an_empty_table(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF" + bytes(60))
    assert read_cfi(str(junk)).rules == []
    assert read_cfi(str(tmp_path / "missing")).rules == []


def test_folded_stacks_sum_the_intervals_and_keep_their_separators_out() -> None:
    def snap(t: float, *stacks: ProfileStack) -> Snapshot:
        return Snapshot(t=t, host="h", profile=ProfilePart(99, stacks=stacks))

    a = ProfileStack(1, 1, ("main", "f;g"), samples=3, off_ns=5.0)
    b = ProfileStack(1, 2, ("main", "h"), samples=1, runnable_ns=7.0)
    snaps = [snap(1.0, a, b), snap(2.0, a), Snapshot(t=3.0, host="h")]
    assert folded_lines(folded(snaps)) == ["main;f:g 6", "main;h 1"]
    assert folded_lines(folded(snaps, off=True)) == ["main;f:g 10", "main;h 7"]


def _patched_section(tmp_path: Path, name: str, field: str, value: int) -> Path:
    """/bin/true with one field of section NAME's header (ELF64) set to VALUE."""
    data = bytearray(BINARY.read_bytes())
    with open(BINARY, "rb") as f:
        elf = ELFFile(f)
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == name)
        at = elf["e_shoff"] + index * elf["e_shentsize"]
    offset, size = {"sh_type": (4, 4), "sh_flags": (8, 8), "sh_size": (32, 8)}[field]
    data[at + offset : at + offset + size] = value.to_bytes(size, "little")
    out = tmp_path / f"{name.strip('.')}-{field}"
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        (".eh_frame", "sh_type", 8),  # SHT_NOBITS: pyelftools would make zeros of sh_size
        (".eh_frame", "sh_size", 1 << 40),  # a terabyte claimed by a small file
        (".eh_frame", "sh_flags", 0x800 | 0x2),  # SHF_COMPRESSED: inflated to any size
        (".eh_frame_hdr", "sh_size", 1 << 40),
    ],
)
def test_a_section_that_claims_more_than_the_file_holds_is_not_read(
    tmp_path: Path, name: str, field: str, value: int
) -> None:
    import resource
    import time

    bad = _patched_section(tmp_path, name, field, value)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()
    table = read_cfi(str(bad))
    assert table.find(0x1000) is None
    assert time.process_time() - started < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB
