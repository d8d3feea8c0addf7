"""GNU indirect functions (glibc's strlen, memcpy...): listed as such, probed where
their calls go (the implementation the resolver picked), refused with a reason when
that cannot be known."""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.elf import ifunc
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.system.targets import resolve_target

LIBC = resolve_target("c")


IFUNC_LIB = r"""
static int one(void) { return 1; }
static int (*pick(void))(void) { return one; }
int chosen(void) __attribute__((ifunc("pick")));
"""


def test_libc_ifuncs_are_listed_as_such_and_compat_versions_are_not() -> None:
    funcs = {f.name: f for f in read_elf(LIBC).functions}
    assert funcs["strlen"].ifunc and not funcs["malloc"].ifunc
    # memcpy@GLIBC_2.2.5 (a plain function kept for 2002's binaries) is left out:
    # the memcpy listed is memcpy@@GLIBC_2.14, the IFUNC every binary since calls.
    assert [f.ifunc for f in read_elf(LIBC).functions if f.name == "memcpy"] == [True]


def test_resolve_finds_the_implementation_this_cpu_runs() -> None:
    vaddr = ifunc.resolve(read_elf(LIBC), "strlen")
    resolver = next(f.address for f in read_elf(LIBC).functions if f.name == "strlen")
    assert vaddr != resolver
    libc = ctypes.CDLL(LIBC)
    called = ctypes.cast(libc.strlen, ctypes.c_void_p).value
    assert called == ifunc.mapped_start(LIBC) + vaddr  # type: ignore[operator]


def refused_for_other_tunables() -> None:
    """A process started with other GLIBC_TUNABLES is refused from the moment Popen returns."""
    other = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"}
    )
    try:
        with pytest.raises(ifunc.IfuncError, match="GLIBC_TUNABLES"):
            ifunc.resolve(read_elf(LIBC), "strlen", other.pid)
    finally:
        other.kill()
        other.wait()


def test_resolve_refuses_what_it_cannot_know(tmp_path: Path) -> None:
    so = tmp_path / "libchosen.so"
    src = tmp_path / "chosen.c"
    src.write_text(IFUNC_LIB)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    assert next(f for f in read_elf(str(so)).functions if f.name == "chosen").ifunc
    with pytest.raises(ifunc.IfuncError, match="not loaded"):
        ifunc.resolve(read_elf(so), "chosen")  # loading it would run its constructors here
    ctypes.CDLL(str(so))  # once the monitor has it, it resolves
    assert ifunc.resolve(read_elf(so), "chosen") > 0
    refused_for_other_tunables()


def test_the_path_named_is_never_opened_only_the_file_read(tmp_path: Path) -> None:
    """An IFUNC is resolved in a file this process loaded, found by the device and
    inode it was read from: a path a user named (swapped meanwhile for her file, or a
    FIFO that would hang dlopen) is never opened; her own copy of libc is refused."""
    import dataclasses

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real = read_elf(LIBC)
    named = dataclasses.replace(real, path=str(fifo))
    assert ifunc.resolve(named, "strlen") == ifunc.resolve(real, "strlen")
    copy = tmp_path / "libc.so.6"
    copy.write_bytes(Path(LIBC).read_bytes())
    with pytest.raises(ifunc.IfuncError, match="has not loaded"):
        ifunc.resolve(read_elf(copy), "strlen")
