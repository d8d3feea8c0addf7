"""Regenerate screenshots/*.svg from a real run: record the test workload under real
probes (root), then play the recording through each screen and save it.

    .venv/bin/python -m scripts.screenshots    (from the repository root; or: make screenshots)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adaptyst_top.runtime.model_store import DIR_ENV
from adaptyst_top.runtime.sources import ReplaySource
from adaptyst_top.tui.app import MonitorApp
from tests.support.paths import REPO
from tests.support.workload import build

OUT = REPO / "screenshots"


def record(directory: Path) -> Path:
    binary = build(directory)
    script: list[str] = []
    for _ in range(10):
        script += [
            "task",
            "spmv",
            "40",
            "2000",
            "task",
            "gemm",
            "10",
            "8000",
            "held",
            "20",
            "3000",
            "fast",
            "20000",
            "tick",
            "500",
            "leaf",
            "5000",
        ]
    return record_to(
        directory / "run.jsonl",
        [
            "--interval",
            "0.5",
            # No RAPL in a VM: the stated model, so the probes show their joules.
            "--cpu-power-model",
            "10:90",
            "--probe",
            f"uprobe:{binary}:*_fn",
            "--probe",
            f"usdt:{binary}:adaptyst_test:task_begin..task_end@arg1",
            "--probe",
            f"usdt:{binary}:adaptyst_test:tick",
        ],
        [str(binary), *script],
    )


def record_demo(directory: Path) -> Path:
    """The demo workload under the advisor (auto mode), as `make demo` runs it."""
    from adaptyst_top.placement.demo import command as demo_command
    from adaptyst_top.placement.task_api import TASK_SPEC

    return record_to(
        directory / "demo.jsonl",
        ["--interval", "1", "--advisor", "--auto", "--probe", TASK_SPEC],
        demo_command(phase_s=8, duration=20),
    )


def record_job(out: Path) -> Path:
    """A job's view from a login node, recorded as the job's user: an MPI job (MPICH) of
    4 nodes x 2 ranks, each node a namespace with its own sshd, agent and slurmd
    (tests/support/nodes.py), its last rank computing twice as long."""
    import uuid

    from adaptyst_top.cli.main import main as cli_main
    from tests.support.agent_unit import useradd, with_the_units_capabilities
    from tests.support.as_user import become
    from tests.support.nodes import Nodes
    from tests.support.paths import TARGETS

    user = useradd(f"adt-s-{uuid.uuid4().hex[:6]}", "/bin/sh")
    subprocess.run(["usermod", "-p", "*", user.name], check=True)
    nodes = Nodes(4, [user], with_the_units_capabilities())
    try:
        assert nodes.slurm is not None
        binary = nodes.base / "mpi_slow"
        subprocess.run(
            ["mpicc", "-O1", "-g", "-o", str(binary), str(TARGETS / "mpi_slow.c")], check=True
        )
        binary.chmod(0o755)
        theirs = nodes.base / "job"
        theirs.mkdir()
        os.chown(theirs, user.uid, user.gid)
        script = theirs / "job.sh"
        script.write_text(
            f"#!/bin/sh\nsrun --mpi=pmi2 {binary} {theirs / 'go'} {theirs / 'own.json'} 150\n"
        )
        script.chmod(0o755)
        job = nodes.slurm.sbatch(user.uid, user.gid, script, "-N4", "-n8", "--ntasks-per-node=2")
        while nodes.slurm.state(job) != "RUNNING":
            time.sleep(0.2)
        time.sleep(2.0)  # its ranks started on every node
        (theirs / "go").touch()
        view = theirs / "view.jsonl"
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                become(user.uid, user.gid)
                os.environ.update(nodes.login_env(user))
                args = ["record", "--job", job, "--interval", "0.5", "--out", str(view)]
                args += ["--probe", f"uprobe:{binary}:compute", "--probe", "mpi:Allreduce"]
                code = cli_main(args)
            finally:
                os._exit(code)
        os.waitpid(pid, 0)
        out.write_bytes(view.read_bytes())
    finally:
        nodes.stop()
        subprocess.run(["userdel", user.name], check=False)
    return out


def record_to(out: Path, options: list[str], command: list[str]) -> Path:
    """`adaptyst-top record OPTIONS -- COMMAND` into a file (CPU energy from a power model:
    there is no RAPL on the machines this runs on)."""
    with open(out, "w") as f:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "adaptyst_top.cli.start",
                "record",
                "--cpu-power-model",
                "20:120",
                *options,
                "--",
                *command,
            ],
            stdout=f,
            stderr=subprocess.DEVNULL,
            check=True,
            # A newcomer's first run: no models kept from an earlier one (nor kept after).
            env={**os.environ, DIR_ENV: str(out.parent / "models")},
        )
    return out


async def shoot(
    recording: Path,
    name: str,
    size: tuple[int, int],
    keys: list[str],
    steps: int = 6,
    ascii: bool = False,
    on_tasks: bool = False,
) -> None:
    """KEYS pressed after STEPS snapshots; ON_TASKS: with the advisor's table focused."""
    app = MonitorApp(ReplaySource(recording), interval=0.5, autoplay=False, ascii=ascii)
    async with app.run_test(size=size) as pilot:
        for _ in range(steps):
            app.step()
        await pilot.pause()
        if on_tasks:
            app.set_focus(app.advisor.tasks)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        app.save_screenshot(str(OUT / f"{name}.svg"))


async def main() -> None:
    if os.geteuid() != 0:
        sys.exit("screenshots: needs root (the run is probed with real eBPF)")
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        rec = record(Path(tmp))
        await shoot(rec, "monitor", (110, 32), [])
        await shoot(rec, "monitor-80x24", (80, 24), [])
        await shoot(rec, "monitor-ascii", (100, 30), [], ascii=True)
        await shoot(rec, "probe-detail", (110, 32), ["down", "enter"])
        await shoot(rec, "help", (100, 30), ["question_mark"])
        await shoot(rec, "sorted-by-p99", (110, 32), ["s", "s", "s", "s"])
        await shoot(rec, "power", (110, 32), ["e"], steps=20)
        job = record_job(Path(tmp) / "job.jsonl")
        await shoot(job, "job-80x24", (80, 24), [], steps=10)
        await shoot(job, "job-130x36", (130, 36), [], steps=10)
        await shoot(job, "job-ranks-130x36", (130, 36), ["R"], steps=10)
        demo = record_demo(Path(tmp))
        await shoot(demo, "demo", (120, 36), [], steps=18)
        await shoot(demo, "task-plots", (120, 40), ["enter"], steps=18, on_tasks=True)
    print("\n".join(sorted(str(p.relative_to(REPO)) for p in OUT.glob("*.svg"))))


if __name__ == "__main__":
    asyncio.run(main())
