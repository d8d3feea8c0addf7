"""Each node's ranks asked on that node, as the user, through their own ssh: here an
ssh that runs the command in place (ADAPTYST_TOP_SSH), and one that answers nonsense."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adaptyst_top.runtime.node_ranks import ask_ranks
from adaptyst_top.runtime.remote.transport import REMOTE_ENV, SSH_ENV


def _fake_ssh(tmp_path: Path, body: str) -> Path:
    ssh = tmp_path / "ssh"
    ssh.write_text("#!/bin/sh\n" + body)
    ssh.chmod(0o755)
    return ssh


def test_ranks_are_read_by_the_users_process_on_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ssh -o BatchMode=yes -- NODE REMOTE ARGS...: the command run here, as the node would.
    ssh = _fake_ssh(tmp_path, 'shift 4; exec "$@"\n')
    remote = tmp_path / "adaptyst-top"
    remote.write_text(f'#!/bin/sh\nexec {sys.executable} -m adaptyst_top.cli.start "$@"\n')
    remote.chmod(0o755)
    monkeypatch.setenv(SSH_ENV, str(ssh))
    monkeypatch.setenv(REMOTE_ENV, str(remote))
    rank = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={**os.environ, "PMI_RANK": "4"},
    )
    try:
        told = ask_ranks("node1", [rank.pid, os.getpid()])
    finally:
        rank.communicate(b"")
    assert told is not None and told[rank.pid] == 4
    assert told[os.getpid()] == (int(os.environ["PMI_RANK"]) if "PMI_RANK" in os.environ else None)


@pytest.mark.parametrize(
    "answer",
    ['{"5": -1, "6": "2", "7": 1e30}', '{"5": 99999999999}'],
)
def test_what_a_node_says_is_believed_only_as_a_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    monkeypatch.setenv(SSH_ENV, str(_fake_ssh(tmp_path, f"echo '{answer}'\n")))
    assert ask_ranks("node1", [5, 6, 7]) == {5: None, 6: None, 7: None}


@pytest.mark.parametrize("answer", ["[1, 2]", "not json"])
def test_an_answer_that_is_no_object_is_none_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    monkeypatch.setenv(SSH_ENV, str(_fake_ssh(tmp_path, f"echo '{answer}'\n")))
    assert ask_ranks("node1", [5]) is None


def test_an_ssh_that_fails_or_is_late_is_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SSH_ENV, str(_fake_ssh(tmp_path, "echo refused >&2; exit 255\n")))
    assert ask_ranks("node1", [5]) is None
    monkeypatch.setenv(SSH_ENV, str(tmp_path / "missing"))
    assert ask_ranks("node1", [5]) is None
    monkeypatch.setenv(SSH_ENV, str(_fake_ssh(tmp_path, "exec sleep 30\n")))
    assert ask_ranks("node1", [5], timeout=0.5) is None
    assert ask_ranks("n", []) == {}
