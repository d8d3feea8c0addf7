"""opencl: rows for a user through the agent: their launched pyopencl program's kernels
counted and timed as root's session counts them, the layer's file read as the user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.system.agent.test_agent import (  # noqa: F401 - the fixtures
    Agent,
    User,
    agent,
    record_as,
    shared,
    users,
)

pytestmark = [pytest.mark.ebpf, requires_root]
PROGRAM = TARGETS / "opencl_launches.py"


def test_a_users_launched_programs_kernels_through_the_agent(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
) -> None:
    alice, _ = users
    work = Path(tempfile.mkdtemp(prefix="adt-ocl-"))
    os.chown(work, alice.uid, alice.gid)
    out, own = work / "rec.jsonl", work / "own.json"

    program = [sys.executable, str(PROGRAM), "--out", str(own), "--launches", "400"]
    cache = {"HOME": str(work), "XDG_CACHE_HOME": str(work)}  # PoCL's kernel cache
    try:
        last = record_as(
            agent, alice, out, ["--probe", "opencl:*", "--budget", "100", "--", *program], cache
        )
        launched = json.loads(own.read_text())["launches"]
        got = {p["name"]: p for p in last["probes"]}
        assert {n: p["count"] for n, p in got.items()} == launched
        assert all(p["kind"] == "opencl" and p["timed"] == p["count"] for p in got.values())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_users_running_program_has_its_launches_counted_from_the_host(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
) -> None:
    """--pid through the agent on a program started without the layer: as for root, a
    uprobe on the OpenCL loader the program maps counts its launches (that loader's file
    opened as the user, with the spec's own)."""
    alice, _ = users
    work = Path(tempfile.mkdtemp(prefix="adt-ocl-"))
    os.chown(work, alice.uid, alice.gid)
    out, own = work / "rec.jsonl", work / "own.json"
    program = [sys.executable, str(PROGRAM), "--out", str(own), "--hold", "12", "--loop"]
    cache = {"HOME": str(work), "XDG_CACHE_HOME": str(work)}
    prog = subprocess.Popen(
        [*program, "--launches", "3000"],
        user=alice.uid,
        group=alice.gid,
        extra_groups=[],
        env={**os.environ, **cache},
        cwd=work,
    )
    try:
        time.sleep(1.5)  # OpenCL loaded, holding
        args = ["--pid", str(prog.pid), "--probe", "opencl:*", "--duration", "60"]
        last = record_as(agent, alice, out, args, cache)
        rows = [p for p in last["probes"] if p["kind"] == "uprobe"]  # type: ignore[union-attr]
        assert [(p["name"], p["count"]) for p in rows] == [("clEnqueueNDRangeKernel", 3000)]
    finally:
        prog.kill()
        prog.wait()
        shutil.rmtree(work, ignore_errors=True)
