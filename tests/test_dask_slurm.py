"""Placement on Dask whose workers are Slurm jobs (dask-jobqueue's SLURMCluster), on the
real one-node Slurm the agent tests start, everything bound to 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

jobqueue = pytest.importorskip("dask_jobqueue")

from distributed import Client  # noqa: E402

from adaptyst_top.dask import DevicePlacement, placement_report  # noqa: E402
from adaptyst_top.dask import demo_kernels as dk  # noqa: E402
from adaptyst_top.dask.placed import TOPIC  # noqa: E402
from adaptyst_top.placement.task_api import TASK_SPEC, parse_key  # noqa: E402

from .conftest import IS_ROOT  # noqa: E402
from .test_dask import LARGE, SMALL, agrees, inputs  # noqa: E402

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="a Slurm of its own needs root")


@pytest.fixture
def slurm_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    from .slurm import Slurm

    s = Slurm()
    try:
        monkeypatch.setenv("SLURM_CONF", str(s.conf))
        yield s
    finally:
        s.stop()


def jobs(slurm: object) -> set[str]:
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i"],
        env=slurm.env,
        capture_output=True,
        text=True,
        timeout=30,  # type: ignore[attr-defined]
    )
    return set(out.stdout.split())


@contextlib.contextmanager
def recording(job: str, out: Path) -> Iterator[subprocess.Popen[str]]:
    """`adaptyst-top record --job JOB` on the task API's probes, once it has attached
    (its first line); at exit, given a minute to end with the job, then killed."""
    log = out.with_suffix(".stderr")
    options = ["--probe", TASK_SPEC, "--interval", "0.2", "--duration", "300", "--out", str(out)]
    with log.open("w") as err:
        rec = subprocess.Popen(
            [sys.executable, "-m", "adaptyst_top.cli.start", "record", "--job", job, *options],
            stderr=err,
            text=True,
        )
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and out.read_text().count("\n") >= 1):
            assert rec.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "record never started"
            time.sleep(0.1)
        yield rec
    finally:
        try:
            rec.wait(60)
        finally:
            rec.kill()
            rec.wait()


@pytest.mark.ebpf
def test_slurm_jobs_as_workers_run_placed_calls_where_they_run_best(
    slurm_env: object, tmp_path: Path
) -> None:
    warnings.filterwarnings("ignore", message="Sending large graph")
    common = {
        "cores": 1,
        "processes": 1,
        "memory": "1GB",
        "python": sys.executable,
        "walltime": "00:10:00",
        "log_directory": str(tmp_path),
        "local_directory": str(tmp_path),
        "scheduler_options": {"host": "127.0.0.1", "dashboard_address": None},
    }
    out = tmp_path / "job.jsonl"
    with (
        contextlib.ExitStack() as records,  # left last: after the cluster ended the job
        jobqueue.SLURMCluster(
            worker_extra_args=["--host", "127.0.0.1", "--resources", "opencl=1"],
            **common,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster.scale(1)
        client.wait_for_workers(1, timeout=90)
        client.register_plugin(DevicePlacement("time"))
        client.run(dk.warm)
        # The workers are Slurm jobs: their processes carry the job's ID, which squeue lists.
        ids = set(client.run(lambda: os.environ.get("SLURM_JOB_ID")).values())
        assert None not in ids and ids <= jobs(slurm_env)
        # The node's monitor on the worker's job sees the placed calls as tasks.
        (job,) = ids
        rec = records.enter_context(recording(str(job), out))
        rng = np.random.default_rng(4)
        for _ in range(16):
            xs = [inputs(rng, n) for n in (SMALL, SMALL, LARGE, LARGE)]
            ys = client.gather(client.map(dk.logistic, xs, pure=False))
            assert all(agrees(x, y) for x, y in zip(xs, ys, strict=True))
        runs = [m for _, m in client.get_events(TOPIC)]
        assert len(runs) == 64 and {m["kind"] for m in runs} == {"cpu", "opencl"}
        report = placement_report(client)
        assert report["placed"] == 64 and all(
            r["nodes"] == {"127.0.0.1": 32} for r in report["tasks"]
        )
    # Closing the cluster ended the job, and with it the record, which counted every call
    # on the device the worker reported.
    assert rec.returncode == 0, out.with_suffix(".stderr").read_text()
    last = json.loads(out.read_text().splitlines()[-1])
    seen = Counter[str]()
    for p in last["probes"]:
        k = parse_key(p["key"]) if isinstance(p.get("key"), str) else None
        if k is not None and k[0] == "logistic":
            seen[k[1]] += p["count"]
    assert seen == Counter(m["kind"] for m in runs), (seen, last["probes"])
    assert last["target_ended"] and last["target"]["name"] == f"job {job}"
    # Closing the cluster cancelled its jobs (squeue lists them while they complete).
    deadline = time.monotonic() + 30
    while jobs(slurm_env) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not jobs(slurm_env)
