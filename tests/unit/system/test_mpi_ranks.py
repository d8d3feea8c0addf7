"""An MPI rank read from a process's own environment, a launcher's number first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from adaptyst_top.system.mpi_ranks import RankNames, rank_in


def test_a_launchers_rank_wins_over_the_batch_steps() -> None:
    # mpiexec inside a batch job: every rank inherits the batch step's SLURM_PROCID=0.
    env = b"SLURM_PROCID=0\0PMI_RANK=3\0HOME=/x\0"
    assert rank_in(env) == 3
    assert rank_in(b"OMPI_COMM_WORLD_RANK=7\0PMIX_RANK=7\0") == 7
    assert rank_in(b"SLURM_PROCID=12\0SLURM_STEP_ID=0\0") == 12
    assert rank_in(b"SLURM_STEPID=3\0SLURM_PROCID=12\0") == 12


def test_the_batch_steps_script_and_its_srun_are_no_rank() -> None:
    # As Slurm 22.05 sets them (measured under tests/support/slurm.py): the batch
    # step's environment, which srun inherits, has SLURM_PROCID=0 and no step ID.
    batch = b"SLURM_JOB_ID=1\0SLURM_LOCALID=0\0SLURM_PROCID=0\0SLURM_TASK_PID=7040\0"
    assert rank_in(batch) is None


def test_what_is_not_a_rank_is_none() -> None:
    assert rank_in(b"") is None
    assert rank_in(b"PMI_RANK=-1\0") is None
    assert rank_in(b"PMI_RANK=1e3\0") is None
    assert rank_in(b"PMI_RANK=99999999999\0") is None
    assert rank_in(b"XPMI_RANK=2\0") is None  # a name that only ends like one
    assert rank_in(b"PMI_RANK=x\0SLURM_PROCID=4\0SLURM_STEP_ID=1\0") == 4  # the next one


def test_a_process_is_read_once_and_remembered_past_its_end() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={**os.environ, "PMI_RANK": "5"},
    )
    names = RankNames()
    try:
        assert names.rank_of(child.pid) == 5
    finally:
        child.communicate(b"")
    assert names.rank_of(child.pid) == 5  # its last snapshot comes after it ended
    assert names.rank_of(os.getpid()) is None or "PMI_RANK" in os.environ


def test_a_process_gone_before_it_was_read_has_none(tmp_path: Path) -> None:
    assert RankNames(tmp_path).rank_of(12345) is None
