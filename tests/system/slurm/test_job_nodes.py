"""`--job ID` from a login node (this process), for a job on three nodes: each node a
namespace with its own hostname, address, sshd, agent and slurmd (tests/support/nodes.py),
the job a real MPI program (MPICH, 2 ranks a node, srun --mpi=pmi2) whose last rank computes
twice as long. One `ssh NODE adaptyst-top bridge` per node, as the job's user, merged into
one view: every rank's rows by node and rank, the slow rank as the imbalance maximum with
the ratio the program measured, the others' wait in MPI_Allreduce; a node whose sshd stops
turns into a row with a reason and comes back; another user's job refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adaptyst_top.cli.main import main as cli_main
from tests.support.cli import CLI
from tests.support.marks import IS_ROOT
from tests.support.paths import TARGETS
from tests.system.agent.test_agent import (
    AsUser,
    User,
    _useradd,
    hear,
    say,
    with_the_units_capabilities,
)
from tests.system.slurm.test_mpi_job import check_slowest, row
from tests.system.slurm.test_slurm import until

pytestmark = [
    pytest.mark.ebpf,
    pytest.mark.skipif(not IS_ROOT, reason="namespaces, daemons and eBPF need root"),
]
NODES, PER_NODE, STEPS = 3, 2, 40
RANKS = NODES * PER_NODE


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, User, User, Path]]:
    """(the nodes, the job's user, another user, the MPI program on every node)."""
    from tests.support.nodes import Nodes

    tag = uuid.uuid4().hex[:6]
    alice, bob = _useradd(f"adt-j-{tag}", "/bin/sh"), _useradd(f"adt-k-{tag}", "/bin/sh")
    for u in (alice, bob):  # no password, but not locked: sshd refuses a locked one's keys
        subprocess.run(["usermod", "-p", "*", u.name], check=True)
    nodes = None
    try:
        nodes = Nodes(NODES, [alice, bob], with_the_units_capabilities())
        binary = nodes.base / "mpi_slow"
        subprocess.run(
            ["mpicc", "-O1", "-g", "-o", str(binary), str(TARGETS / "mpi_slow.c")], check=True
        )
        binary.chmod(0o755)
        yield nodes, alice, bob, binary
    finally:
        if nodes is not None:
            nodes.stop()
        for u in (alice, bob):
            subprocess.run(["userdel", u.name], check=False)


def submit(nodes: Any, user: User, binary: Path, steps: int) -> tuple[str, Path, Path]:
    """The MPI job, waiting for its go file; (its ID, the go file, where it writes its own
    figures)."""
    theirs = nodes.base / f"job-{uuid.uuid4().hex[:6]}"
    theirs.mkdir()
    os.chown(theirs, user.uid, user.gid)
    go, measured = theirs / "go", theirs / "measured.json"
    script = theirs / "job.sh"
    script.write_text(f"#!/bin/sh\nsrun --mpi=pmi2 {binary} {go} {measured} {steps}\n")
    script.chmod(0o755)
    job = nodes.slurm.sbatch(
        user.uid, user.gid, script, f"-N{NODES}", f"-n{RANKS}", f"--ntasks-per-node={PER_NODE}"
    )
    until(lambda: len(ranks_running(user, job)) == RANKS, f"job {job}: {nodes.slurm.logs()}")
    return job, go, measured


def ranks_running(user: User, job: str) -> list[int]:
    """The job's ranks (those of a job before it may still be ending)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            mine = d.name.isdigit() and d.stat().st_uid == user.uid
            tag = f"SLURM_JOB_ID={job}".encode()
            if (
                mine
                and (d / "comm").read_text().strip() == "mpi_slow"
                and tag in (d / "environ").read_bytes().split(b"\0")
            ):
                found.append(int(d.name))
        except OSError:
            continue
    return found


def relays_of(user: User) -> dict[int, list[bytes]]:
    """USER's relays running (`bridge --job ID --nodes ...`): pid -> its command line."""
    found = {}
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and d.stat().st_uid == user.uid:
                argv = (d / "cmdline").read_bytes().split(b"\0")
                # adaptyst-top itself (not the login node's ssh that started it)
                if b"adaptyst_top.cli.start" in argv and b"--nodes" in argv:
                    found[int(d.name)] = argv
        except OSError:
            continue
    return found


# A fan-out of 2 on 3 nodes: a relay on node1 for node1 and node2, node3 directly.
FANOUTS = pytest.mark.parametrize("fanout", [None, 2], ids=["direct", "relayed"])


@FANOUTS
def test_a_jobs_ranks_on_every_node_in_one_view(
    cluster: tuple[Any, User, User, Path], fanout: int | None
) -> None:
    nodes, alice, _bob, binary = cluster
    job, go, measured = submit(nodes, alice, binary, STEPS)
    rank_pids = ranks_running(alice, job)
    out = go.parent / "view.jsonl"
    try:

        def client(up: int, _down: int) -> None:
            os.environ.update(nodes.login_env(alice))
            os.chdir(go.parent)
            args = ["record", "--job", job, "--interval", "0.5", "--out", str(out), "--profile"]
            args += ["--probe", f"uprobe:{binary}:compute", "--probe", "mpi:Allreduce"]
            args += [] if fanout is None else ["--fanout", str(fanout)]
            say(up, code=cli_main(args))

        c = AsUser(alice, client)
        until(lambda: out.exists() and out.read_text().count("\n") >= 1, f"no view: {nodes.logs()}")
        relays = relays_of(alice)
        if fanout is not None:  # one relay, on node1, in node1's namespace
            (argv,) = relays.values()
            assert argv[argv.index(b"--nodes") + 1] == b"node1,node2", argv
            uts = os.readlink(f"/proc/{nodes.nodes[0].holder.pid}/ns/uts")
            assert os.readlink(f"/proc/{next(iter(relays))}/ns/uts") == uts
        else:
            assert not relays, relays
        go.touch()
        assert c.read() == {"code": 0}
        assert c.wait() == 0
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        last = lines[-1]
        compute, allreduce = row(last, "compute"), row(last, "MPI_Allreduce")
        for r in (compute, allreduce):
            assert r["count"] == RANKS * STEPS, r["count"]
            assert sorted(p["rank"] for p in r["parts"]) == list(range(RANKS)), r["parts"]
            per_node = [p["node"] for p in r["parts"]]
            assert sorted(set(per_node)) == [n.name for n in nodes.nodes]
            assert all(per_node.count(n) == PER_NODE for n in set(per_node))
        check_slowest(compute, allreduce, json.loads(measured.read_text()))
        # Every node answered, each one's devices under its name.
        assert any([n["state"] for n in x.get("nodes", [])] == ["ok"] * NODES for x in lines), [
            x.get("nodes") for x in lines
        ]
        assert {d["id"].split("/")[0] for d in last["devices"]} == {n.name for n in nodes.nodes}
        # --profile went to every node: their stacks, each under its node and rank, are
        # what export folds.
        folded = subprocess.run(
            [*CLI, "export", str(out), "--folded", "--out", "-"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.splitlines()
        heads = {tuple(line.split(";")[:2]) for line in folded if ";compute " in line + " "}
        assert {h[0] for h in heads} == {n.name for n in nodes.nodes}, folded[:5]
        assert {h[1] for h in heads} == {f"rank {r}" for r in range(RANKS)}, heads
        # From the first snapshot on (the ranks asleep, waiting for GO, off the CPU),
        # no rank's stack is named by its pid: each rank is one flame, not two.
        off = subprocess.run(
            [*CLI, "export", str(out), "--folded", "--off", "--out", "-"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.splitlines()
        by_pid = {int(h[4:]) for h in (x.split(";")[1] for x in off) if h.startswith("pid ")}
        assert not by_pid & set(rank_pids), (by_pid, rank_pids)
        # The batch step's srun (SLURM_PROCID=0 too, no step ID) is no rank.
        ranked = [x for x in off if x.split(";")[1].startswith("rank ")]
        assert not [x for x in ranked if "slurm" in x.lower()], ranked[:3]
        until(lambda: not relays_of(alice), "the relay outlived the view", 15)
    finally:
        go.touch()
        until(lambda: nodes.slurm.state(job) not in ("RUNNING", "PENDING"), "job end", 60)


@FANOUTS
def test_a_node_lost_is_a_row_that_says_why_and_comes_back(
    cluster: tuple[Any, User, User, Path], fanout: int | None
) -> None:
    from adaptyst_top.runtime.job_tree import DEFAULT_FANOUT
    from adaptyst_top.runtime.session import open_session
    from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target

    nodes, alice, _bob, binary = cluster
    job, go, _measured = submit(nodes, alice, binary, 100_000)  # until cancelled
    go.touch()
    lost = nodes.nodes[1]
    try:

        def client(up: int, down: int) -> None:
            os.environ.update(nodes.login_env(alice))
            spec = f"uprobe:{binary}:compute"
            target = Target(job=job, job_fanout=fanout or DEFAULT_FANOUT)
            opts = SessionOptions(target, ProbeSettings(specs=[spec]))
            session = open_session(opts)

            def state_of(name: str) -> tuple[str, str | None, int]:
                snap = session.snapshot(with_hist=False)
                node = next(n for n in snap.nodes if n.name == name)
                counted = sum(q.count for p in snap.probes for q in p.parts if q.node == name)
                return node.state, node.reason, counted

            try:
                deadline = time.monotonic() + 60
                while state_of(lost.name)[0] != "ok" or state_of(lost.name)[2] == 0:
                    assert time.monotonic() < deadline, state_of(lost.name)
                    time.sleep(0.2)
                say(up, ok=True)
                hear(down)  # its sshd is stopped
                deadline = time.monotonic() + 60
                while (now := state_of(lost.name))[0] == "ok":
                    assert time.monotonic() < deadline, now
                    time.sleep(0.2)
                others = [state_of(n.name)[0] for n in nodes.nodes if n is not lost]
                say(up, state=now[0], reason=now[1], others=others, before=now[2])
                hear(down)  # its sshd is back
                deadline = time.monotonic() + 60
                while (again := state_of(lost.name))[0] != "ok" or again[2] <= now[2]:
                    assert time.monotonic() < deadline, again
                    time.sleep(0.2)
                say(up, back=True)
            finally:
                session.close()

        c = AsUser(alice, client)
        assert c.read() == {"ok": True}
        nodes.stop_sshd(lost)
        c.tell()
        said = c.read()
        assert said["state"] == "lost" and said["reason"], said
        assert lost.name in str(said["reason"]) or "ssh" in str(said["reason"]), said
        assert said["others"] == ["ok"] * (NODES - 1), said
        nodes.start_sshd(lost)
        c.tell()
        assert c.read() == {"back": True}
        assert c.wait() == 0
        until(lambda: not relays_of(alice), "the relay outlived the view", 15)
    finally:
        subprocess.run(["scancel", job], env=nodes.slurm.env, check=False)
        go.touch()
        until(lambda: nodes.slurm.state(job) not in ("RUNNING", "PENDING"), "job end", 60)


def test_another_users_job_is_refused_on_every_node_in_one_line(
    cluster: tuple[Any, User, User, Path],
) -> None:
    nodes, alice, bob, binary = cluster
    job, go, _measured = submit(nodes, alice, binary, 1)
    out = nodes.base / f"bob-{uuid.uuid4().hex[:6]}.err"
    try:

        def client(up: int, _down: int) -> None:
            os.environ.update(nodes.login_env(bob))
            import contextlib
            import io
            import sys

            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = cli_main(["record", "--job", job, "--duration", "5", "--out", "/dev/null"])
            sys.stderr.flush()
            say(up, code=code, err=err.getvalue())

        c = AsUser(bob, client)
        said = c.read()
        assert c.wait() == 0
        lines = str(said["err"]).strip().splitlines()
        assert said["code"] != 0 and len(lines) == 1, said
        assert f"job {job} belongs to user {alice.name}" in lines[0], said
    finally:
        out.unlink(missing_ok=True)
        go.touch()
        until(lambda: nodes.slurm.state(job) not in ("RUNNING", "PENDING"), "job end", 60)
