"""A spec's TARGET by name with --pid: what the process maps, the library first."""

from __future__ import annotations

import subprocess
from pathlib import Path

from adaptyst_top.system.targets import resolve_target

LIB = "int adtx_step(int x) { return x + 1; }\n"
MAIN = """
#include <stdio.h>
#include <unistd.h>
int adtx_step(int);
int main(void) { printf("%d\\n", adtx_step(1)); fflush(stdout); pause(); return 0; }
"""


def test_a_name_shared_by_the_program_and_its_library_is_the_library(tmp_path: Path) -> None:
    """As the sqlite3 shell maps libsqlite3.so.0: `uprobe:sqlite3:sqlite3_step --pid`
    resolved to /usr/bin/sqlite3, where no such function is; without --pid (and `list
    --binary sqlite3`) the name is the library."""
    (tmp_path / "lib.c").write_text(LIB)
    (tmp_path / "main.c").write_text(MAIN)
    lib = tmp_path / "libadtx.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "lib.c")], check=True)
    (tmp_path / "libadtx.so").symlink_to(lib.name)
    program = tmp_path / "adtx"
    subprocess.run(
        ["gcc", "-o", str(program), str(tmp_path / "main.c"), f"-L{tmp_path}", "-ladtx",
         f"-Wl,-rpath,{tmp_path}"],
        check=True,
    )  # fmt: skip
    proc = subprocess.Popen([str(program)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "2\n"
        assert resolve_target("adtx", proc.pid) == str(lib)
        assert resolve_target(str(program), proc.pid) == str(program)  # a path is a path
    finally:
        proc.kill()
        proc.wait()


def test_a_short_name_finds_a_wheels_renamed_copy_of_its_library() -> None:
    """auditwheel renames what a wheel bundles (pyopencl's libOpenCL-5519dec5.so.1.0.0):
    `uprobe:OpenCL:clEnqueueNDRangeKernel --pid` found the system's copy, which the
    process does not map, and counted 0."""
    from adaptyst_top.system.targets import _lib_pattern

    loose = _lib_pattern("OpenCL", strict=False)
    for name in ("libOpenCL-5519dec5.so.1.0.0", "libOpenCL.so.1", "libOpenCL-2.so"):
        assert loose.match(name), name
    for name in ("libOpenCL-wrapper.so", "libOpenCLx.so", "libOpenCL-5519dec5x.so"):
        assert not loose.match(name), name
