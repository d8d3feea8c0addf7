"""Where a job runs, as Slurm's own commands say (a fake scontrol on PATH), and which step
daemons are this node's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adaptyst_top.system.slurm_jobs import JobError, JobInfo, _this_nodes, job_nodes, parse_scontrol


def _scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "scontrol"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_a_jobs_nodes_from_its_hostlist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = parse_scontrol("7", "JobId=7 UserId=alice(1001) JobState=RUNNING NodeList=node[1-3]")
    assert info.node_list == "node[1-3]"
    _scontrol(
        tmp_path, monkeypatch, '[ "$3" = "node[1-3]" ] && printf "node1\\nnode2\\nnode3\\n"\n'
    )
    assert job_nodes(info) == ["node1", "node2", "node3"]


def test_a_job_not_placed_has_no_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pending = parse_scontrol("7", "JobId=7 UserId=alice(1001) JobState=PENDING NodeList=(null)")
    assert pending.node_list is None and job_nodes(pending) == []
    _scontrol(tmp_path, monkeypatch, "exit 1\n")
    assert job_nodes(JobInfo("7", 1, "a", "RUNNING", "n[1-2]")) == []


def test_a_node_name_scontrol_should_never_say_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scontrol(tmp_path, monkeypatch, 'printf "node1\\n-oProxyCommand=x\\n"\n')
    with pytest.raises(JobError, match="oddly"):
        job_nodes(JobInfo("7", 1, "a", "RUNNING", "n[1-2]"))


def test_a_step_daemon_in_another_uts_namespace_is_another_nodes(tmp_path: Path) -> None:
    if not Path("/proc/self/ns/uts").exists():
        pytest.skip("no namespaces here")
    assert _this_nodes(os.getpid(), Path("/proc"))
    # Not readable (another user's, or a fake /proc): taken as this node's, as before.
    assert _this_nodes(12345, tmp_path)
