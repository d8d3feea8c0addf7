"""cuda: rows for a user through the agent: their launched program's kernels (on
CUPTI's fake) counted and timed exactly, the injection library's sites read as the
user's own process's."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.kinds.device_layer import shown_name
from tests.support.cuda_fake import build_app
from tests.support.marks import requires_root
from tests.system.agent.test_agent import (  # noqa: F401 - the fixtures
    Agent,
    User,
    agent,
    record_as,
    shared,
    users,
)

pytestmark = [pytest.mark.ebpf, requires_root]


def test_a_users_launched_programs_cuda_kernels_through_the_agent(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
) -> None:
    alice, _ = users
    work = Path(tempfile.mkdtemp(prefix="adt-cuda-"))
    os.chmod(work, 0o755)
    app = build_app(work)
    out, own = work / "rec.jsonl", work / "own.json"
    os.chown(work, alice.uid, alice.gid)

    program = [str(app), "--out", str(own), "--launches", "2000", "--graph", "30"]
    try:
        last = record_as(
            agent, alice, out, ["--probe", "cuda:*", "--budget", "100", "--", *program]
        )
        launched = json.loads(own.read_text())["launches"]
        got = {p["name"]: p for p in last["probes"]}
        assert {n: p["count"] for n, p in got.items()} == {
            shown_name(n): c for n, c in launched.items()
        }
        assert all(p["kind"] == "cuda" and p["timed"] == p["count"] for p in got.values())
    finally:
        shutil.rmtree(work, ignore_errors=True)
