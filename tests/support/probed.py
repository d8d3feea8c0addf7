"""Run a program under a probe from its first instruction of interest: the program waits
for a line on stdin, the probe attaches, the line goes, the program runs to its end."""

from __future__ import annotations

import subprocess
from typing import Any

from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine


def rows_and_output(argv: list[str], spec: str) -> tuple[list[dict[str, Any]], str]:
    """The probe's rows after the run, and what the program printed."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with ProbeEngine(pid=proc.pid) as engine:
            group = engine.add(spec)
            assert engine.wait(120) and group.state == "attached", group.error
            out, _ = proc.communicate("go\n", timeout=60)
            assert proc.returncode == 0
            engine.read()
            return [e.to_json() for e in engine.snapshot_rows()], out
    finally:
        proc.kill()
        proc.wait()


def rows_after_run(argv: list[str], spec: str) -> list[dict[str, Any]]:
    return rows_and_output(argv, spec)[0]
