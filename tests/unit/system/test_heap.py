"""What the monitor gives back after bcc's compiler ran: only pages that are the
file's own are dropped, and a probe compiled after the drop counts exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from adaptyst_top.system.heap import clean_ranges, drop_clean_pages

SMAPS = """\
7f0000000000-7f0000100000 r-xp 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1
Rss:                1024 kB
Anonymous:             0 kB
Private_Dirty:         0 kB
Swap:                  0 kB
7f0000100000-7f0000200000 r--p 00100000 08:01 11 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1
Rss:                1024 kB
Anonymous:            12 kB
Private_Dirty:        12 kB
7f0000200000-7f0000300000 rw-p 00200000 08:01 11 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1
Rss:                  64 kB
Anonymous:             0 kB
7f0000300000-7f0000400000 r--p 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libclang-cpp.so.14
Private_Dirty:         0 kB
7f0000400000-7f0000500000 r-xp 00000000 08:01 13 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0000500000-7f0000600000 r-xp 00000000 08:01 14 /home/eve/libLLVM-evil/libc.so.6
Anonymous:             0 kB
"""


def test_only_clean_read_only_mappings_of_the_compiler_are_dropped() -> None:
    ranges = list(clean_ranges(SMAPS.splitlines(True), ("libLLVM", "libclang")))
    # The code, and clang's read-only data; not relocated data (its own pages), not a
    # writable mapping, not libc, and a folder's name is not a file's.
    assert ranges == [(0x7F0000000000, 0x7F0000100000), (0x7F0000300000, 0x7F0000400000)]


def test_a_mapped_path_of_any_bytes_never_fails_the_drop(tmp_path: Path) -> None:
    """smaps was read as strict UTF-8: a library at a path of other bytes raised from
    the end of a compile turn, after the compile itself had worked."""
    import mmap

    odd = os.path.join(os.fsencode(tmp_path), b"lib\xffLLVM.so")
    with open(odd, "wb") as f:
        f.write(b"\0" * 8192)
    with open(odd, "rb") as f, mmap.mmap(f.fileno(), 8192, prot=mmap.PROT_READ) as m:
        assert m[0] == 0
        assert drop_clean_pages(("libLLVM", "\udcff")) >= 0
        assert m[:4] == b"\0\0\0\0"  # dropped or not, its pages read the same


def test_opencl_devices_are_listed_in_a_child_process() -> None:
    """PoCL's LLVM never enters the monitor (~75 MiB resident for its whole run)."""
    code = (
        "from adaptyst_top.collectors.devices.sweep import DeviceSweep\n"
        "s = DeviceSweep()\n"
        "print([d.name for d in s.opencl.devices])\n"
        "print(any('pocl' in l or 'OpenCL' in l for l in open('/proc/self/maps')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out[-1] == "False"
    assert "pthread" in out[-2] or "cpu" in out[-2].lower(), out  # PoCL's CPU device


def test_the_opencl_lister_never_outlives_its_parent() -> None:
    """Started for a PID that is not its parent (it died first), the lister exits at once
    with no answer; its parent's death otherwise kills it (PR_SET_PDEATHSIG)."""
    r = subprocess.run(
        [sys.executable, "-I", "-m", "adaptyst_top.collectors.devices.opencl_inventory", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert r.returncode == 1 and r.stdout == ""
