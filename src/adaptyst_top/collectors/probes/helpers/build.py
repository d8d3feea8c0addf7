"""The small C programs the tool runs on itself (calibration, the entry check), built
once per source version with the system's compiler into the private cache, and what
they measured, cached there per boot."""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from adaptyst_top.system.private_files import cache_dir, private_dir, write_private


class HelperBuildError(RuntimeError):
    pass


def helper_source(name: str) -> bytes:
    return files("adaptyst_top.collectors.probes.helpers").joinpath(f"{name}.c").read_bytes()


def build_helper(name: str, directory: Path | None = None) -> Path:
    """helpers/NAME.c compiled (-O2) into DIRECTORY (the cache by default)."""
    if platform.machine() != "x86_64":
        raise HelperBuildError(f"{name} is written for x86-64 only (this is {platform.machine()})")
    src = helper_source(name)
    digest = hashlib.sha256(src).hexdigest()[:12]
    # The binary is run, so its folder must be ours alone (a private cache).
    directory = private_dir(directory) if directory else cache_dir()
    binary = directory / f"{name}-{digest}"
    if binary.exists():
        return binary
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise HelperBuildError(f"no C compiler (gcc) to build {name}")
    c_file = directory / f"{name}-{digest}.c"
    c_file.write_bytes(src)
    tmp = binary.with_suffix(".tmp")
    proc = subprocess.run(
        [cc, "-O2", "-o", str(tmp), str(c_file)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise HelperBuildError(f"building {name} failed: {err}")
    tmp.rename(binary)
    return binary


class HelperProcess:
    """One of those programs, running: it says "ready", then answers each line with one."""

    def __init__(self, binary: Path) -> None:
        self.proc = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        if self.ask(None) != "ready":
            self.close()
            raise HelperBuildError(f"{binary.name} did not start")

    def ask(self, line: str | None) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def boot_key(*inputs: bytes) -> str:
    """What a cached result is valid for: this boot, this kernel, these inputs (the
    helper's source, our handlers...)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "?"
    return f"{boot}:{platform.release()}:{hashlib.sha256(b''.join(inputs)).hexdigest()[:12]}"


def load_result(name: str, key: Callable[[], str]) -> Any:
    """The cached result NAME made for the KEY of now; None when there is none (or none
    we trust, or the key cannot be made: a user who cannot read our sources)."""
    try:
        data = json.loads((cache_dir() / f"{name}.json").read_text())
        wanted = key()
    except (OSError, ValueError):
        return None  # unreadable, or a cache folder that is not safely ours
    if not isinstance(data, dict) or data.get("key") != wanted:
        return None
    return data.get("result")


def save_result(name: str, key: str, result: Any) -> None:
    data = {"key": key, "result": result}
    write_private(cache_dir() / f"{name}.json", json.dumps(data, indent=1).encode())
