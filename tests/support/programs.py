"""Test programs built from tests/support/targets/ for tests in more than one folder."""

import subprocess
from pathlib import Path

from tests.support.paths import TARGETS
from tests.support.workload import build_c

ESCAPES = TARGETS / "escapes.c"
KEYS = TARGETS / "keys.c"
EVIL = "evil\x1b]0;pwned\x07\x1b[2J"  # a symbol that would retitle and clear a terminal


def build_escapes(directory: Path) -> Path:
    """escapes.c with its function `evil` renamed to EVIL, escape sequences and all."""
    obj, out = directory / "escapes.o", directory / "escapes"
    subprocess.run(["gcc", "-O1", "-c", "-o", obj, ESCAPES], check=True)
    subprocess.run(["objcopy", f"--redefine-sym=evil={EVIL}", obj], check=True)
    subprocess.run(["gcc", "-o", out, obj], check=True)
    return out


def build_keys(directory: Path) -> Path:
    # A PIE whatever gcc's default here: loaded anywhere, as the bias tests need.
    return build_c(KEYS, directory, "-O1", "-fPIE", "-pie")


def build_stripped_lib(directory: Path, build_id: str) -> tuple[Path, Path]:
    """targets/stripped_lib.c's libhot.so (its two hot functions static, without frame
    pointers), stripped to its exported names, and its separate debug file (objcopy
    --only-keep-debug) beside it. BUILD_ID: hex, its own (the host's debug tree is
    shared with every other test)."""
    lib, debug = directory / "libhot.so", directory / "libhot.debug"
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-fomit-frame-pointer",
            "-fPIC",
            "-shared",
            "-DLIBHOT",
            f"-Wl,--build-id=0x{build_id}",
            "-o",
            str(lib),
            str(TARGETS / "stripped_lib.c"),
        ],
        check=True,
    )
    subprocess.run(["objcopy", "--only-keep-debug", str(lib), str(debug)], check=True)
    subprocess.run(["strip", "--strip-unneeded", str(lib)], check=True)
    return lib, debug


def build_many_functions(directory: Path, n: int) -> Path:
    """libmany.so: N exported functions f0 .. f{N-1} of one `ret` each (a listing's size,
    not its code, is what it is for)."""
    asm, lib = directory / "many.s", directory / "libmany.so"
    with asm.open("w") as f:
        f.write(".text\n")
        for i in range(n):
            f.write(f".globl f{i}\n.type f{i},@function\nf{i}:\n\tret\n.size f{i},1\n")
    subprocess.run(["gcc", "-shared", "-nostdlib", "-o", str(lib), str(asm)], check=True)
    asm.unlink()
    return lib
