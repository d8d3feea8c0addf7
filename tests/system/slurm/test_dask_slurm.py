"""Placement on Dask whose workers are Slurm jobs (dask-jobqueue's SLURMCluster), on the
real one-node Slurm the agent tests start, everything bound to 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

jobqueue = pytest.importorskip("dask_jobqueue")

from distributed import Client  # noqa: E402

from adaptyst_top.dask import DevicePlacement, placement_report  # noqa: E402
from adaptyst_top.dask import demo_kernels as dk  # noqa: E402
from adaptyst_top.dask.placed import TOPIC  # noqa: E402
from adaptyst_top.placement.task_api import TASK_SPEC, parse_key  # noqa: E402
from tests.support.marks import IS_ROOT  # noqa: E402
from tests.system.dask.test_dask import LARGE, SMALL, agrees, inputs  # noqa: E402

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="a Slurm of its own needs root")


@pytest.fixture
def slurm_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    from tests.support.slurm import Slurm

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
def recording(job: str, out: Path, agent: Path) -> Iterator[subprocess.Popen[str]]:
    """`adaptyst-top record --job JOB` on the task API's probes through the node's AGENT,
    once it has attached (its first line); at exit, given a minute to end with the job,
    then killed."""
    log = out.with_suffix(".stderr")
    options = ["--probe", TASK_SPEC, "--interval", "0.2", "--duration", "300", "--out", str(out)]
    options += ["--agent", str(agent)]
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


def scrape(listen: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The agent's metrics now: (sample name, its labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{listen}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def job_series(
    metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, job: str
) -> dict[str, float]:
    """NAME's samples of JOB, by their other labels' text."""
    out = {}
    for (n, labels), v in metrics.items():
        d = dict(labels)
        if n == name and d.get("job") == job:
            out[",".join(f"{k}={x}" for k, x in labels if k not in ("job", "node", "user"))] = v
    return out


@pytest.mark.ebpf
def test_slurm_jobs_as_workers_run_placed_calls_where_they_run_best(
    slurm_env: object, tmp_path: Path
) -> None:
    """...and the node's agent sees the worker job's calls: `record --job` through it
    counts each, and its Prometheus metrics give the job's tasks and energy."""
    from tests.system.agent.test_agent import Agent
    from tests.system.prometheus.test_metrics import free_port

    config = tmp_path / "agent.toml"
    # The job's joules fresh at each scrape (by default they are published once a minute).
    config.write_text(
        'probe_metrics = "jobs"\ncpu_power_model = "10:90"\nmetrics_energy_period_s = 0.0\n'
    )
    listen = f"127.0.0.1:{free_port()}"
    agent = Agent(tmp_path / "agent.sock", "--config", str(config), "--metrics", listen)
    warnings.filterwarnings("ignore", message="Sending large graph")
    common = {
        "cores": 1,
        "processes": 1,
        "memory": "1GB",
        "python": sys.executable,
        "walltime": "00:10:00",
        "log_directory": str(tmp_path),
        "local_directory": str(tmp_path),
        "scheduler_options": {
            "host": "127.0.0.1",
            "dashboard": False,
            "dashboard_address": "127.0.0.1:0",
        },
    }
    out = tmp_path / "job.jsonl"
    with (
        contextlib.closing(SimpleNamespace(close=agent.stop)),  # stopped last
        contextlib.ExitStack() as records,  # left after the cluster ended the job
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
        rec = records.enter_context(recording(str(job), out, agent.path))
        scrape(listen)  # the job's energy counts from the agent's first look at it
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
        # The agent's metrics: the job's runs per device, as the workers reported them,
        # and the job's CPU energy (the power model's estimate: no RAPL here).
        want = {
            f"device={k},task=logistic": float(n)
            for k, n in Counter(m["kind"] for m in runs).items()
        }
        deadline = time.monotonic() + 30
        while (got := job_series(scrape(listen), "adaptyst_task_runs_total", str(job))) != want:
            assert time.monotonic() < deadline, (got, want)
            time.sleep(0.5)
        energy = job_series(scrape(listen), "adaptyst_job_energy_joules_total", str(job))
        assert energy and all(v > 0 for v in energy.values()), energy
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
