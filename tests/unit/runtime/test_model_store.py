"""The learner's models kept between runs of an application: one private file per
application and node, read at the start, written at the end; what another user could
steer is never used, a damaged file is not used and says so in one line."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from adaptyst_top.placement.control import ControlClient, ControlServer
from adaptyst_top.placement.learned_advisor import LearnedAdvisor
from adaptyst_top.placement.loop import PlacementLoop
from adaptyst_top.runtime.model_store import (
    DIR_ENV,
    app_name,
    app_of,
    kept_models,
    load_models,
    models_path,
    save_models,
)
from adaptyst_top.runtime.session_options import AdvisorSettings, SessionOptions, Target
from adaptyst_top.runtime.session_parts import start_placement
from adaptyst_top.snapshot import DeviceReading
from tests.support.marks import requires_root
from tests.support.waits import wait_until


def learned_advisor() -> LearnedAdvisor:
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    for _ in range(6):
        adv.observe("spmv", "cpu", (16, 2), 0.004, 1, size=70_000)
        adv.observe("spmv", "opencl:0", (16, 2), 0.001, 1, size=70_000)
    return adv


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "models"
    monkeypatch.setenv(DIR_ENV, str(d))
    return d


def test_kept_models_come_back_as_priors(folder: Path) -> None:
    path = models_path("solver", "cn042")
    assert path == folder / "solver@cn042.json"
    assert save_models(path, learned_advisor().to_json()) is None
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(folder).st_mode & 0o777) == "0o700"
    data, why = load_models(path)
    assert why is None and data is not None
    warm = LearnedAdvisor(["cpu", "opencl:0", "cuda"])
    assert warm.from_json(data) is None and warm.learned_count() == 2
    assert warm.remembered("spmv") == "opencl:0"  # before its first run here
    warm.observe("spmv", "cpu", (16, 2), 0.004, 1, size=70_000)  # its first run here
    p = warm.predictions("spmv")
    assert p["opencl:0"].time_s == pytest.approx(0.001, rel=0.1) and p["opencl:0"].samples == 5


def test_nothing_kept_yet_is_said_as_nothing(folder: Path) -> None:
    assert load_models(models_path("solver", "cn042")) == (None, None)


def test_a_folder_others_may_write_is_neither_read_nor_written(folder: Path) -> None:
    path = models_path("solver", "cn042")
    assert save_models(path, learned_advisor().to_json()) is None
    os.chmod(folder, 0o777)
    data, why = load_models(path)
    assert data is None and why is not None and "writable by others" in why
    assert "writable by others" in (save_models(path, learned_advisor().to_json()) or "")


@pytest.mark.parametrize(
    "text, says",
    [
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not a version 2"),
        (b'{"version": 1, "models": []}', "not a version 2"),  # the advisor's, before
        (b'{"version": 2, "last": {}, "learner": {"version": 1}}', "no 'first' map"),
        (b'{"version": 2, "last": {"t": ["t|0", -1]}, "learner": {}}', "damaged 'last'"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_a_damaged_file_is_not_used_and_says_why(folder: Path, text: bytes, says: str) -> None:
    folder.mkdir(mode=0o700)
    path = models_path("solver", "cn042")
    path.write_bytes(text)
    data, why = load_models(path)
    if data is not None:
        adv = LearnedAdvisor(["cpu"])
        why = adv.from_json(data)
        assert adv.learned_count() == 0 and adv.unplaced() == []  # nothing taken
    assert why is not None and says in why and "\n" not in why


def test_the_application_is_named_by_its_program_or_its_script() -> None:
    assert app_name(["/opt/app/bin/solver", "-n", "4"]) == "solver"
    assert app_name(["/usr/bin/python3", "-u", "tools/train.py", "x"]) == "train.py"
    assert app_name(["python3.11", "-m", "adaptyst_top.placement.demo"]) == (
        "adaptyst_top.placement.demo"
    )
    assert app_name(["python3", "-c", "print(1)"]) == "python3"
    assert app_name([]) is None


@requires_root
def test_another_users_application_has_models_of_its_own() -> None:
    mine = subprocess.Popen(["sleep", "30"])
    theirs = subprocess.Popen(["sleep", "30"], user=65534, group=65534, extra_groups=[])
    try:
        assert wait_until(lambda: app_of([], theirs.pid) == "sleep (uid 65534)", 5.0)
        assert app_of([], mine.pid) == "sleep"
        assert models_path("sleep (uid 65534)", "h") != models_path("sleep", "h")
    finally:
        for p in (mine, theirs):
            p.kill()
            p.wait()


def test_a_session_starts_from_the_kept_models_and_keeps_its_own(folder: Path) -> None:
    cpu = DeviceReading(id="cpu", kind="cpu", name="cpu")
    opts = SessionOptions(Target(command=["/opt/app/solver"]), advisor=AdvisorSettings("time"))
    path = models_path("solver")
    save_models(path, learned_advisor().to_json())
    loop = start_placement(opts, [cpu])
    try:
        assert loop.prior == "1 model(s) from earlier runs of solver"  # cpu: the device here
        for _ in range(3):
            loop.advisor.observe("gemm", "cpu", (10, 0), 0.002, 1, size=1024)
    finally:
        loop.close()
    data, _ = load_models(path)
    assert data is not None
    assert {m["task"] for m in data["learner"]["models"]} == {"spmv|2", "gemm|0"}
    fresh = start_placement(
        SessionOptions(
            Target(command=["/opt/app/solver"]), advisor=AdvisorSettings("time", kept_models=False)
        ),
        [cpu],
    )
    try:
        assert fresh.prior == "" and fresh.keep is None and fresh.advisor.unplaced() == []
    finally:
        fresh.close()


@pytest.mark.parametrize("mode", ["auto", "suggest"])
def test_an_application_starts_where_earlier_runs_placed_its_task(
    tmp_path: Path, mode: str
) -> None:
    """In auto mode the remembered device is the task's standing assignment, sent over a
    real socket when the application registers, before the task's first run; suggest
    mode moves nothing without the user."""
    server = ControlServer(tmp_path / "control.sock")
    advisor = LearnedAdvisor(["cpu", "opencl:0"])
    assert advisor.from_json(learned_advisor().to_json()) is None
    loop = PlacementLoop(advisor, server)
    loop.set_mode(mode)
    got: list[tuple[str, str, int | None]] = []
    client = ControlClient(["spmv"], lambda t, d, r: got.append((t, d, r)), server.path, 0.1)
    try:
        assert wait_until(lambda: any(c.registered for c in server.clients))
        if mode == "auto":
            assert wait_until(lambda: got == [("spmv", "opencl:0", None)])
            assert loop.prior.endswith(
                "placed at start: spmv on opencl:0"
            )  # the advisor pane's line
        else:
            time.sleep(0.3)
            assert got == [] and server.assignments == {}
    finally:
        client.close()
        loop.close()


def _mutated(change: str) -> bytes:
    """A kept file of real models, one number in it made hostile."""
    data = {"version": 2, **learned_advisor().to_json()}
    model = data["learner"]["models"][0]
    if change == "huge":  # JSON's integers have no bound; a float's has
        model["noise"] = ["HUGE", 3.0]
        return json.dumps(data).replace('"HUGE"', "1" + "0" * 400).encode()
    if change == "level":
        model["mean"][0] = -1000.0  # a run of e^-1000 s: 0.0, and a division by it
    elif change == "cov":
        model["cov"] = [[1e308 if i == j else 0.0 for j in range(12)] for i in range(12)]
    elif change == "noise":
        model["noise"] = "12"
    return json.dumps(data).encode()


@pytest.mark.parametrize("change", ["huge", "level", "cov", "noise"])
def test_a_kept_file_the_learner_could_not_have_written_is_refused_whole(
    folder: Path, change: str
) -> None:
    folder.mkdir(mode=0o700)
    path = models_path("solver")  # this node's, as a session reads it
    path.write_bytes(_mutated(change))
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    keep, line = kept_models("solver", adv)  # as a session starts: never a traceback
    assert keep is not None and "damaged" in line and "\n" not in line
    assert adv.learned_count() == 0
    adv.observe("spmv", "cpu", (16, 2), 0.004, 5, size=70_000)
    adv.observe("spmv", "cpu", (16, 2), 0.004, 5, size=70_000)
    assert adv.decide("spmv") is not None  # learns afresh, and says so
