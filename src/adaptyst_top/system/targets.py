"""Resolving a spec's TARGET (a path or a library short name) to a file, like bcc does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class TargetError(ValueError):
    """A target that cannot be probed; the message is one line for the user."""


class ProcStat(NamedTuple):
    uid: int  # the owner of its /proc entry
    start: int  # clock ticks since boot: with the PID, who it is
    comm: str  # the program: an exec changes it, not the start
    cpu_ns: int  # user + system time of all its threads (not reaped children's)


def process_stat(pid: int, proc: Path = Path("/proc")) -> ProcStat | None:
    """PID's stat line, parsed; None once it is gone (or unreadable)."""
    try:
        with open(proc / str(pid) / "stat") as f:
            uid = os.fstat(f.fileno()).st_uid
            head, tail = f.read().rsplit(")", 1)
        fields = tail.split()
        cpu = (int(fields[11]) + int(fields[12])) * TICK_NS
        return ProcStat(uid, int(fields[19]), head.split("(", 1)[1], cpu)
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def process_cpu_ns(pid: int) -> int | None:
    """User+system CPU time of a process and its reaped children, in ns."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def process_start(pid: int, proc_dir: int | None = None) -> int | None:
    """When the process started (clock ticks since boot): with the PID, who it is; a PID
    reused by another process has another start. proc_dir: an open /proc/PID folder,
    read through (the process it was opened for, whatever has its PID now)."""
    try:
        if proc_dir is None:
            with open(f"/proc/{pid}/stat") as f:
                text = f.read()
        else:
            fd = os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc_dir)
            with os.fdopen(fd) as f:
                text = f.read()
        return int(text.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


PF_KTHREAD = 0x00200000  # in /proc/PID/stat's flags


def check_pid(pid: int) -> None:
    """A user process we can probe, or TargetError saying why not."""
    if pid <= 0 or not pid_alive(pid):
        raise TargetError(f"no such process: PID {pid}")
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        flags = int(fields[6])
    except (OSError, IndexError, ValueError):
        return
    if flags & PF_KTHREAD:
        raise TargetError(f"PID {pid} is a kernel thread: it runs no user code to probe")


# A file of a process in another mount namespace, as mount_root() prefixes it: never
# resolved through symlinks from here (/proc/PID/root reads as "/": the host's file).
CONTAINER_PATH = re.compile(r"^/proc/(\d+)/root(/.*)$")


def mount_root(pid: int) -> str:
    """Where PID's files are from here: "" when it sees the mounts we see, else
    /proc/PID/root (a container's or any other mount namespace's root; its paths do
    not name the same files on the host, and may not exist there at all)."""
    try:
        if os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            return ""
    except OSError:
        return ""  # gone, or its namespace hidden from us: its paths as they are
    return f"/proc/{pid}/root"


def mapped_files(pid: int) -> list[str]:
    """Files the process maps executable, in map order (the main binary first), as
    paths that open them from here (under /proc/PID/root for a container's process)."""
    root = mount_root(pid)
    out: list[str] = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
                    path = root + parts[5].strip()
                    if path not in out:
                        out.append(path)
    except FileNotFoundError:
        raise TargetError(f"no such process: PID {pid}") from None
    except PermissionError:
        why = (
            "the process is shielded even from root here (another PID namespace or a "
            "sandbox's protection)"
            if os.geteuid() == 0
            else "it belongs to another user (run as root, or probe your own processes)"
        )
        raise TargetError(f"cannot read /proc/{pid}/maps: {why}") from None
    return out


def _lib_pattern(name: str, strict: bool) -> re.Pattern[str]:
    if strict:  # `c` -> libc.so.6
        return re.compile(rf"^lib{re.escape(name)}\.so(\.[0-9.]+)?$")
    # `python3` -> libpython3.11.so.1.0, `crypto` -> libcrypto-3.so, `OpenCL` -> a wheel's
    # copy renamed by auditwheel, libOpenCL-5519dec5.so.1.0.0
    return re.compile(rf"^(lib)?{re.escape(name)}([.-][0-9.]*)?(-[0-9a-f]{{8}})?\.so(\.[0-9.]+)?$")


def _from_ldconfig(name: str, strict: bool) -> str | None:
    pattern = _lib_pattern(name, strict)
    machine = os.uname().machine
    candidates = [p for p in _ldconfig_cache() if pattern.match(os.path.basename(p))]
    # Prefer the machine's own ABI directory over multilib copies.
    candidates.sort(key=lambda p: (machine not in p, len(p)))
    return str(Path(candidates[0]).resolve()) if candidates else None


@lru_cache(maxsize=1)
def _ldconfig_cache() -> tuple[str, ...]:
    try:
        out = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.rsplit("=>", 1)[1].strip() for line in out.splitlines() if "=>" in line)


def resolve_target(target: str, pid: int | None = None) -> str:
    """An absolute path to an ELF file for TARGET; raises TargetError. For a process in
    another mount namespace TARGET is a path or library as that process sees them."""
    if pid is not None and (root := mount_root(pid)):
        return _resolve_inside(target, pid, root)
    if "/" in target:
        p = Path(target)
        if not p.exists():
            raise TargetError(f"{target}: no such file")
        if not p.is_file():
            raise TargetError(f"{target}: not a regular file")
        return str(p.resolve())
    if pid is not None:
        # What the process really maps wins over the system's library cache.
        found = _mapped_library(target, pid)
        if found:
            return found
    found = _from_ldconfig(target, strict=True)
    if found:
        return found
    exe = shutil.which(target)
    if exe:
        return str(Path(exe).resolve())
    found = _from_ldconfig(target, strict=False)
    if found:
        return found
    where = f" mapped by PID {pid}" if pid is not None else ""
    raise TargetError(f"{target}: no such library or executable{where}")


def _resolve_inside(target: str, pid: int, root: str) -> str:
    """TARGET in the mount namespace of PID: a path under its root (never resolved
    through symlinks from here: /proc/PID/root reads as "/" and would lead to the host's
    file), or a library it maps; the host's library cache says nothing about it."""
    if "/" in target:
        if not target.startswith("/"):
            raise TargetError(
                f"{target}: PID {pid} runs in another mount namespace (a container): "
                "give the path as it sees it, from its root"
            )
        p = Path(root + target)
        if not p.is_file():
            raise TargetError(f"{target}: no such file in PID {pid}'s container")
        return str(p)
    found = _mapped_library(target, pid)
    if found:
        return found
    raise TargetError(f"{target}: no such library mapped by PID {pid} (in a container)")


def mapped_library(target: str, pid: int) -> str | None:
    """The library TARGET names that PID maps, or None (the system's are not asked)."""
    try:
        return _mapped_library(target, pid)
    except (OSError, ValueError):
        return None


def _mapped_library(target: str, pid: int) -> str | None:
    """The file PID maps whose name is TARGET's library name (libTARGET.so.N), else
    TARGET itself, else a looser library name; as without --pid, where the library
    cache comes before the executables on PATH: `sqlite3` with the sqlite3 shell's PID
    is the libsqlite3.so.0 it maps, not /usr/bin/sqlite3."""
    files = mapped_files(pid)
    names = [(path, os.path.basename(path)) for path in files]
    strict, loose = _lib_pattern(target, True), _lib_pattern(target, False)
    for matches in (strict.match, target.__eq__, loose.match):
        for path, base in names:
            if matches(base):
                return path
    return None
