"""`--job ID` against a real one-node Slurm (tests/support/slurm.py): a user's batch job, its
tasks present and future, counted exactly through the agent; another user refused.
And the job's processes found from the layout Slurm leaves, made by hand (no root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused
from adaptyst_top.system.slurm_jobs import JobError, JobScan, check_job_id, parse_scontrol
from tests.support.marks import IS_ROOT
from tests.system.agent.test_agent import (  # noqa: F401 - fixtures
    Agent,
    AsUser,
    User,
    hear,
    nothing_left,
    say,
    shared,
    users,
)

COUNTS_TIMEOUT_S = 60.0
# A process that spins for 4 s (any user may set SLURM_JOB_ID in its environment).
LIAR = "import time; t = time.monotonic() + 4; all(iter(lambda: time.monotonic() < t, False))"


# ----- discovery from the layout, by hand --------------------------------------------


def fake_process(
    proc: Path,
    pid: int,
    comm: str,
    environ: bytes = b"",
    cgroup: str = "",
    ppid: int = 1,
    cmdline: bytes = b"",
) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True)
    (d / "comm").write_text(comm + "\n")
    (d / "stat").write_text(f"{pid} ({comm}) S {ppid} " + "0 " * 40 + "\n")
    (d / "environ").write_bytes(environ)
    (d / "cgroup").write_text(cgroup)
    (d / "cmdline").write_bytes(cmdline)


@pytest.mark.skipif(not IS_ROOT, reason="a step daemon is root's: the fake one needs root")
def test_a_jobs_processes_are_those_slurm_placed_never_an_environment(tmp_path: Path) -> None:
    fake_process(tmp_path, 14, "slurmstepd", cmdline=b"slurmstepd: [42.batch]\0")  # root's
    fake_process(tmp_path, 10, "solver", b"HOME=/x\0PATH=/bin\0", ppid=14)
    fake_process(tmp_path, 9, "mpi_rank", ppid=10)  # a task's child: the job's too
    fake_process(tmp_path, 11, "solver", b"SLURM_JOB_ID=42\0")  # says so: not placed there
    fake_process(tmp_path, 12, "python", cgroup="0::/system.slice/slurmstepd.scope/job_42/step_0\n")
    fake_process(tmp_path, 13, "bash", cgroup="0::/slurm/uid_1000/job_4/step_0\n")
    # A user's own (delegated) cgroup named like Slurm's: not Slurm's.
    fake_process(
        tmp_path, 16, "x", cgroup="0::/user.slice/user-1000.slice/slurmstepd.scope/job_42/a\n"
    )
    fake_process(tmp_path, 17, "slurmstepd", cmdline=b"slurmstepd: [42.0]\0")  # a user's, named so
    os.chown(tmp_path / "17", 1000, 1000)
    fake_process(tmp_path, 18, "y", ppid=17)
    os.chown(tmp_path / "18", 1000, 1000)
    scan = JobScan("42", tmp_path)
    assert scan.new_processes() == [9, 10, 12]
    assert scan.new_processes() == []  # each once
    fake_process(tmp_path, 15, "solver", ppid=14)
    assert scan.new_processes() == [15]
    # Another user's process below the job's daemon (a setuid program's) is not the job's.
    fake_process(tmp_path, 19, "passwd", ppid=10)
    os.chown(tmp_path / "19", 1000, 1000)
    assert scan.new_processes() == []


def test_job_ids_and_scontrol_lines() -> None:
    assert check_job_id(" 42 ") == "42"
    for bad in ("", "0", "abc", "42;rm", "-1", "1" * 11):
        with pytest.raises(JobError, match="a Slurm job ID is a number"):
            check_job_id(bad)
    info = parse_scontrol(
        "7", "JobId=7 JobName=x UserId=alice(1001) GroupId=alice(1001) JobState=RUNNING"
    )
    assert (info.owner, info.owner_uid, info.state) == ("alice", 1001, "RUNNING")


# ----- a real Slurm ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm() -> Iterator[object]:
    from tests.support.slurm import Slurm

    s = Slurm()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def slurm_agent(slurm: object, shared: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agent]:  # noqa: F811
    """The agent, finding this Slurm as a node's agent finds its site's."""
    from tests.support.slurm import Slurm

    assert isinstance(slurm, Slurm)
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    a = Agent(shared / "agent.sock")
    try:
        yield a
    finally:
        a.stop()
        assert nothing_left(5.0)


def workloads_of(job: str, step: int | None = None) -> list[int]:
    """The job's tasks running tests/support/targets/workload (not its shell, not srun); with
    STEP, only that step's (a task of the step before may still be exiting: seen in CI)."""
    found = []
    for p in JobScan(job).new_processes():
        try:
            comm = Path(f"/proc/{p}/comm").read_text().strip()
            environ = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
        except OSError:
            continue  # it ended since the scan (a step's short-lived helper): seen in CI
        if comm == "workload" and (step is None or f"SLURM_STEP_ID={step}".encode() in environ):
            found.append(p)
    return found


def until(ok: object, what: str, timeout: float = COUNTS_TIMEOUT_S) -> object:
    deadline = time.monotonic() + timeout
    while not (value := ok()):  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


@pytest.mark.ebpf
@pytest.mark.skipif(not IS_ROOT, reason="a Slurm of its own and eBPF need root")
def test_a_users_job_counted_exactly_present_and_future_tasks_through_the_agent(
    slurm: object,
    slurm_agent: Agent,
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    from tests.support.slurm import Slurm

    assert isinstance(slurm, Slurm)
    alice, bob = users
    go1, go2 = shared / f"go1-{os.getpid()}", shared / f"go2-{os.getpid()}"
    wl = shared / "workload"
    script = shared / f"job-{os.getpid()}.sh"
    # Step 1: two tasks there when --job attaches, each forks a child (followed); step 2
    # starts after: its task is found by the job watch, not by following.
    script.write_text(
        "#!/bin/sh\n"
        f"srun -n2 {wl} await {go1} fast 1000 spawn 1 100 50 exit 0\n"
        f"srun -n1 {wl} await {go2} fast 300 exit 0\n"
    )
    script.chmod(0o755)
    job = slurm.sbatch(alice.uid, alice.gid, script, "-n2")
    spec = f"uprobe:{wl}:fast_fn"
    try:
        until(lambda: len(workloads_of(job)) == 2, f"job {job}'s step 1 never ran: {slurm.logs()}")

        def client(up: int, down: int) -> None:
            conn = AgentConnection(str(slurm_agent.path))
            conn.open(None, [spec], 0.02, False, 1000, None, job)
            say(up, ready=True)

            def count() -> int:
                return sum(p.count for p in conn.snapshot(with_hist=False).probes)

            hear(down)
            until(lambda: count() == 2 * (1000 + 50), "step 1")
            say(up, step1=count())
            new_pid = int(hear(down))
            until(lambda: new_pid in conn.snapshot(False).target.pids, "step 2 joined")  # type: ignore[union-attr]
            say(up, joined=True)
            hear(down)
            until(lambda: count() == 2 * (1000 + 50) + 300, "step 2")
            snap = conn.snapshot(with_hist=False)
            say(up, total=count(), target=snap.target.name if snap.target else None)

        c = AsUser(alice, client)
        assert c.read() == {"ready": True}

        def refused(up: int, _down: int) -> None:
            try:
                AgentConnection(str(slurm_agent.path)).open(
                    None, [spec], 0.02, False, 1000, None, job
                )
                say(up, refused=None)
            except AgentRefused as exc:
                say(up, refused=str(exc))

        b = AsUser(bob, refused)
        assert b.read() == {
            "refused": f"job {job} belongs to user {alice.name}; you may target your own jobs"
        }
        assert b.wait() == 0

        go1.touch()
        c.tell()
        assert c.read() == {"step1": 2100}
        # The script's second srun is its step 1 (steps count from 0).
        step2 = until(lambda: workloads_of(job, step=1), f"step 2 never ran: {slurm.logs()}")
        c.tell(str(step2[0]))  # type: ignore[index]
        assert c.read() == {"joined": True}
        go2.touch()
        c.tell()
        assert c.read() == {"total": 2400, "target": f"job {job}"}
        assert c.wait() == 0
        until(lambda: slurm.state(job) == "COMPLETED", f"job {job}: {slurm.state(job)}")
        assert nothing_left(1.0)
    finally:
        for f in (go1, go2, script):
            f.touch()  # a job left waiting ends
        until(lambda: slurm.state(job) not in ("RUNNING", "PENDING"), "job end", 30)
        script.unlink()
        go1.unlink()
        go2.unlink()


@pytest.mark.ebpf
@pytest.mark.skipif(not IS_ROOT, reason="a Slurm of its own and eBPF need root")
def test_record_job_as_root_in_process(
    slurm: object,
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json
    import subprocess
    import sys

    from tests.support.slurm import Slurm

    assert isinstance(slurm, Slurm)
    alice, _ = users
    go, wl = shared / f"go-rec-{os.getpid()}", shared / "workload"
    script = shared / f"job-rec-{os.getpid()}.sh"
    script.write_text(f"#!/bin/sh\nsrun -n2 {wl} await {go} fast 500 exit 0\n")
    script.chmod(0o755)
    job = slurm.sbatch(alice.uid, alice.gid, script, "-n2")
    out = tmp_path / "job.jsonl"
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    try:
        until(lambda: len(workloads_of(job)) == 2, f"job {job} never ran: {slurm.logs()}")
        probe = ["--probe", f"uprobe:{wl}:fast_fn", "--interval", "0.2", "--out", str(out)]
        rec = subprocess.Popen(
            [sys.executable, "-m", "adaptyst_top.cli.start", "record", "--job", job, *probe],
            stderr=subprocess.PIPE,
            text=True,
        )
        until(lambda: out.exists() and out.read_text().count("\n") >= 1, "record started")
        go.touch()
        assert rec.wait(60) == 0, rec.stderr.read() if rec.stderr else ""
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        last = lines[-1]
        assert sum(p["count"] for p in last["probes"]) == 1000
        assert last["target_ended"] and last["target"]["name"] == f"job {job}"
        assert any(len(x["target"]["pids"]) >= 2 for x in lines)
    finally:
        go.touch()
        until(lambda: slurm.state(job) not in ("RUNNING", "PENDING"), "job end", 30)
        script.unlink()
        go.unlink()


def test_one_target_at_a_time() -> None:
    from adaptyst_top.runtime.session import SessionError, open_session
    from adaptyst_top.runtime.session_options import SessionOptions, Target

    with pytest.raises(SessionError, match="give one target: --pid or --job, not both"):
        open_session(SessionOptions(Target(pid=1, job="7")))
    with pytest.raises(SessionError, match="a Slurm job ID is a number"):
        open_session(SessionOptions(Target(job="x")))


@pytest.mark.skipif(not IS_ROOT, reason="a Slurm of its own needs root")
def test_a_job_s_share_of_the_cpu_energy_is_its_cpu_time(
    slurm: object,
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    """The agent's per-job energy on a real job: a task spinning for 2 s, slurmstepd's
    fork exec'd, read every 50 ms or so from before the job is submitted. The CPU's
    energy reads one joule per busy CPU second, so the job's joules are its CPU seconds."""
    from adaptyst_top.collectors.energy.busy import system_busy_ns
    from adaptyst_top.collectors.energy.jobs import JobEnergy
    from adaptyst_top.snapshot import DeviceReading
    from tests.support.slurm import Slurm

    assert isinstance(slurm, Slurm)
    alice, bob = users
    script = shared / f"spin-{os.getpid()}.sh"
    # The spinning process is the one slurmstepd's fork execs (not a child of it); it
    # writes the CPU time it used, in a file of alice's.
    said = shared / f"spin-{os.getpid()}"
    said.mkdir()
    os.chown(said, alice.uid, alice.gid)
    spin = (
        "import time; t = time.monotonic() + 2; all(iter(lambda: time.monotonic() < t, False));"
        f" open('{said}/cpu', 'w').write(str(time.process_time()))"
    )
    script.write_text(f'#!/bin/sh\nsrun -n1 python3 -c "{spin}"\n')
    script.chmod(0o755)

    def cpu() -> list[DeviceReading]:
        joules = system_busy_ns() / 1e9
        return [DeviceReading("cpu", "cpu", "CPU", energy_j=joules, energy_source="rapl")]

    energy = JobEnergy()
    energy.update(cpu())
    job = slurm.sbatch(alice.uid, alice.gid, script, "-n1")
    # Bob spins beside it, saying he is alice's job: his CPU time is not hers (it was
    # charged to her job when the environment was believed).
    liar = subprocess.Popen(
        ["/usr/bin/python3", "-c", LIAR],
        user=bob.uid,
        group=bob.gid,
        extra_groups=[],
        env={"SLURM_JOB_ID": job, "PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + COUNTS_TIMEOUT_S
        gap, last = 0.0, time.monotonic()
        while slurm.state(job) in ("PENDING", "RUNNING", "?"):
            assert time.monotonic() < deadline, f"job {job} never ended: {slurm.logs()}"
            energy.update(cpu())
            gap, last = max(gap, time.monotonic() - last), time.monotonic()
            time.sleep(0.05)
        spent = energy.totals.get((job, "cpu", "cpu-time"), 0.0)
        used = float((said / "cpu").read_text())
        print(f"job {job}: {spent:.3f} J attributed, its task used {used:.3f} CPU s")
        # A process's CPU time counts from its first reading to its last: an interval at
        # each end (one thread) is not seen, and /proc counts in 10 ms ticks. The batch
        # shell's and srun's milliseconds are the job's too.
        assert used - 2 * gap - 0.03 <= spent <= used + 0.2, (spent, used, gap)
    finally:
        liar.kill()
        liar.wait()
        script.unlink()
        shutil.rmtree(said, ignore_errors=True)
