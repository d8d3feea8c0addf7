"""USDT probes split by a string argument: a key is never a pointer. Strings in read-only
data the target has not touched yet, on the heap and on the stack are counted exactly,
first hit included; what cannot be read is counted under <unreadable>."""

from __future__ import annotations

from pathlib import Path

from adaptyst_top.collectors.probes.bpf.keys import UNREADABLE, KeyResolver, read_c_string
from adaptyst_top.collectors.probes.elf.binary_strings import BinaryStrings
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from tests.support.programs import KEYS
from tests.support.workload import build_c


def test_read_c_string_truncates_as_the_kernel_does() -> None:
    import ctypes
    import os

    buf = ctypes.create_string_buffer(b"x" * 40 + b"\0")
    assert read_c_string(os.getpid(), ctypes.addressof(buf)) == b"x" * 31
    assert read_c_string(os.getpid(), 0x10) is None


def _symbol(binary: Path, name: str) -> int:
    from elftools.elf.elffile import ELFFile

    with binary.open("rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        return int(symtab.get_symbol_by_name(name)[0]["st_value"])


def _strings(binary: Path) -> tuple[BinaryStrings, tuple[int, ...]]:
    elf = read_elf(binary)
    sites = tuple(p.address for p in elf.usdt if p.name == "hit")
    return BinaryStrings(str(binary), elf, {0: sites}), sites


def test_a_gone_process_has_its_string_read_from_the_binary(keys_bin: Path) -> None:
    strings, sites = _strings(keys_bin)
    assert not strings.fixed  # built as a PIE
    bias = 0x5555_5555_4000  # where a PIE is loaded: any page
    rodata = bias + _symbol(keys_bin, "from_rodata")
    assert strings.string_at(0, bias + sites[2], rodata, 31) == b"from-rodata"
    assert strings.string_at(0, bias + sites[2], rodata + 5, 3) == b"rod"
    # A hit no site explains, another slot's, or bytes the process could have written:
    nowhere = bias + sites[0] + 2048  # the sites are a few bytes apart
    assert all((nowhere - bias - s) % 4096 for s in sites)
    assert strings.string_at(0, nowhere, rodata, 31) is None
    assert strings.string_at(1, bias + sites[2], rodata, 31) is None
    writable = [s for s in read_elf(keys_bin).loads if s not in strings.segments]
    assert writable
    assert strings.string_at(0, bias + sites[0], bias + writable[-1][0], 31) is None

    def gone(_pid: int) -> None:
        return None

    resolver = KeyResolver({0: "auto"}, gone, strings)
    assert resolver._resolve(2**22 + 1, rodata, "auto", 0, bias + sites[1]) == "from-rodata"
    assert resolver._resolve(2**22 + 1, 0x10000000, "str", 0, bias + sites[1]) == UNREADABLE
    strings.close()
    assert strings.string_at(0, bias + sites[2], rodata, 31) is None


def test_a_binary_at_fixed_addresses_is_read_where_it_was_linked(keys_bin: Path) -> None:
    (keys_bin.parent / "fixed").mkdir(exist_ok=True)
    fixed = build_c(KEYS, keys_bin.parent / "fixed", "-O1", "-no-pie")
    strings, sites = _strings(fixed)
    assert strings.fixed
    rodata = _symbol(fixed, "from_rodata")
    assert strings.string_at(0, sites[3], rodata, 31) == b"from-rodata"
    # Moved by a page, as a PIE would be: not where this file is ever loaded.
    assert strings.string_at(0, sites[3] + 4096, rodata + 4096, 31) is None
    strings.close()


def test_a_changed_file_or_one_that_is_not_a_file_is_never_read(
    keys_bin: Path, tmp_path: Path
) -> None:
    import os
    import shutil

    copy = tmp_path / "keys"
    shutil.copy(keys_bin, copy)
    strings, sites = _strings(copy)
    rodata = _symbol(copy, "from_rodata") + 4096
    assert strings.string_at(0, sites[0] + 4096, rodata, 31) == b"from-rodata"
    with copy.open("ab") as f:  # rewritten in place: what was read of it no longer holds
        f.write(b"\0")
    assert strings.string_at(0, sites[0] + 4096, rodata, 31) is None
    strings.close()
    # Swapped for a FIFO after it was read: opened without waiting, and dropped.
    elf = read_elf(copy)
    copy.unlink()
    os.mkfifo(copy)
    strings = BinaryStrings(str(copy), elf, {0: sites})
    assert strings.segments == ()
    assert strings.string_at(0, sites[0] + 4096, rodata, 31) is None
