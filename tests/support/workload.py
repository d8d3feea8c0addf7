"""The C test target (tests/support/targets/workload.c), built once per session and driven over stdin."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

from tests.support.paths import TARGETS

SOURCE = TARGETS / "workload.c"


def build_c(source: Path, directory: Path, opt: str = "-O1", *flags: str) -> Path:
    """A C test target built with the system's gcc into DIRECTORY, named after SOURCE."""
    binary = directory / source.stem
    subprocess.run(["gcc", opt, *flags, "-o", str(binary), str(source)], check=True)
    return binary


def build(directory: Path) -> Path:
    binary = directory / "workload"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(binary), str(SOURCE)], check=True)
    return binary


class Took(NamedTuple):
    """held_fn's own durations (ns), by its clock from inside."""

    p50: int
    least: int
    mean: int


class Workload:
    """A running target that does exactly what it is told, then says ok."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self.proc = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def run(self, command: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        assert reply == "ok", f"{command!r} -> {reply!r}"

    def cpu_ns(self) -> int:
        """The target's CPU time so far, as its kernel counts it (CLOCK_PROCESS_CPUTIME_ID)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("cpu\n")
        self.proc.stdin.flush()
        said, ns = self.proc.stdout.readline().split()
        assert said == "cpu" and self.proc.stdout.readline().strip() == "ok"
        return int(ns)

    def waited_ns(self) -> int:
        """Time the target has spent runnable but off the CPU (schedstat's run_delay):
        what a busy node adds to a probe's window beyond the target's own clock."""
        with open(f"/proc/{self.pid}/schedstat") as f:
            return int(f.read().split()[1])

    def took(self) -> Took:
        """held_fn's own median, least and mean duration (ns) since the last ask: what a
        probe's figures are held to (a nominal one fails on a loaded node, where a call
        preempted past its end runs long, with the probe or without)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("took\n")
        self.proc.stdin.flush()
        said, p50, least, mean = self.proc.stdout.readline().split()
        assert said == "took" and self.proc.stdout.readline().strip() == "ok"
        return Took(int(p50), int(least), int(mean))

    def exit(self, code: int = 0) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"exit {code}\n")
        self.proc.stdin.flush()
        return self.proc.wait(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
