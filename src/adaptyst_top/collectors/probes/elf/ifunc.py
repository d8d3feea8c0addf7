"""Where a GNU indirect function's calls really go.

An IFUNC symbol (strlen, memcpy, strcmp... in glibc) is the address of a resolver that
the dynamic loader runs once per process, at relocation, to pick an implementation for
this CPU (__strlen_avx2, __strlen_evex...). A uprobe on the symbol counts resolver runs:
bcc's attach by name does exactly that and shows a handful of calls where there are
thousands. The implementation is found by asking this process's dynamic loader, on the
same CPU, for the symbol (dlsym returns the function the resolver picked) and turning
that address back into the file's virtual address.

Only for a library this process has loaded already (RTLD_NOLOAD): loading another one
would run its constructors inside the monitor. The target picks the same
implementation unless its GLIBC_TUNABLES differ from ours (then we refuse, saying so).
"""

from __future__ import annotations

import ctypes
import os

from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo
from adaptyst_top.system.proc_exec import read_proc


class IfuncError(RuntimeError):
    """Why an IFUNC's implementation cannot be found, in one line."""


def mapped_start(path: str) -> int | None:
    """Where this process mapped the file at PATH's first byte."""
    st = os.stat(path)
    found = mapped_here((st.st_dev, st.st_ino))
    return None if found is None else found[0]


def mapped_here(identity: tuple[int, int]) -> tuple[int, str] | None:
    """(where its first byte lies, the name this process loaded it by) of the file of
    IDENTITY (st_dev, st_ino), if this process maps it: matched by the file, never by
    a path someone else may swap meanwhile."""
    dev, ino = identity
    want = f"{os.major(dev):02x}:{os.minor(dev):02x}"
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if (
                len(parts) == 6
                and int(parts[2], 16) == 0
                and (parts[3], parts[4]) == (want, str(ino))
                and parts[5].startswith("/")
            ):
                return int(parts[0].split("-")[0], 16), parts[5].strip()
    return None


def _tunables(pid: int) -> str | None:
    """PID's GLIBC_TUNABLES, or None where it has none."""
    try:
        environ = read_proc(pid, "environ")
    except OSError:
        return os.environ.get("GLIBC_TUNABLES")  # cannot tell: assume the same
    for entry in environ.split(b"\0"):
        if entry.startswith(b"GLIBC_TUNABLES="):
            return entry.split(b"=", 1)[1].decode(errors="replace")
    return None


def resolve(elf: ElfInfo, name: str, pid: int | None = None) -> int:
    """The link-time virtual address, in the file ELF was read from, of the
    implementation NAME resolves to."""
    path = elf.path
    if pid is not None and _tunables(pid) != os.environ.get("GLIBC_TUNABLES"):
        raise IfuncError(
            f"{name} is an IFUNC and PID {pid} runs with other GLIBC_TUNABLES than the "
            "monitor: its implementation may differ; probe the implementation by name"
        )
    # Only a file this process has loaded itself, found by the file read (its device
    # and inode), asked for by the name this process loaded it by: a path a user named
    # is never opened or loaded here (a FIFO there would hang dlopen).
    here = mapped_here(elf.identity[:2]) if elf.identity[1] else None
    try:
        if here is None:
            raise OSError
        start, loaded = here
        lib = ctypes.CDLL(loaded, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        raise IfuncError(
            f"{name} is an IFUNC in {path}, which the monitor has not loaded: its "
            "implementation cannot be resolved without running the library's constructors"
        ) from None
    try:
        addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        raise IfuncError(f"{name}: dlsym found no such symbol in {path}") from None
    if not addr:
        raise IfuncError(f"{name}: the resolver in {path} returned no function")
    vaddr = addr - start + elf.load_base_vaddr
    if vaddr < 0 or elf.offset_of(vaddr) is None:
        raise IfuncError(f"{name}: its resolver in {path} picked a function in another object")
    return vaddr
