"""`list --pid` and the picker on a Python process: the script it runs found from its
command line as the interpreter reads it, its functions by qualified name and def line,
each with the spec that times it; a user's own process listed, another's never."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.cli.main import main
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.runtime.python_listing import python_candidates, python_object, script_of
from tests.support.as_user import run_as
from tests.support.marks import requires_root
from tests.support.paths import TARGETS

NOBODY = 65534


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["python3", "app.py", "x"], "/w/app.py"),
        (["python3", "-u", "-X", "dev", "/srv/app.py"], "/srv/app.py"),
        (["python3", "-W", "ignore", "--", "a.py"], "/w/a.py"),
        (["python3", "-c", "print(1)", "a.py"], None),
        (["python3", "-"], None),
        (["python3"], None),
        (["python3", "-m", "nowhere.mod"], None),  # not a file in its folder
    ],
)
def test_the_script_is_found_as_the_interpreter_reads_its_command_line(
    argv: list[str], expected: str | None
) -> None:
    assert script_of(argv, "/w") == expected


def test_a_module_run_with_m_is_found_in_its_folder(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "tool.py").write_text("def f():\n    pass\n")
    assert script_of(["python3", "-m", "pkg.tool"], str(tmp_path)) == str(tmp_path / "pkg/tool.py")


@pytest.fixture
def shared_program() -> Iterator[Path]:
    """py_calls.py where any user may read it (pytest's folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="adaptyst-pylist-"))
    folder.chmod(0o755)
    program = folder / "py_calls.py"
    shutil.copy(TARGETS / "py_calls.py", program)
    program.chmod(0o644)
    yield program
    shutil.rmtree(folder)


def _running(argv: list[str], **kw: object) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    time.sleep(0.5)  # it maps its interpreter
    return proc


def test_a_python_process_lists_its_functions_with_their_specs(shared_program: Path) -> None:
    proc = _running([sys.executable, str(shared_program), "30"])
    try:
        obj = python_object(proc.pid)
        picked = python_candidates(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert obj is not None and obj["path"] == str(shared_program)
    assert obj["python"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    names = {f["name"]: f for f in obj["python_functions"]}
    long = "TransformerEncoderLayerWithRotaryEmbeddings.forward_attention_block"
    assert set(names) == {"spin", "Model.big", "tiny", long, "main"}
    assert names["Model.big"]["spec"] == f"python:{shared_program}:Model.big"
    source = shared_program.read_text().splitlines()
    assert source[names["Model.big"]["line"] - 1].strip() == "def big(self):"
    assert f"python:{shared_program}:spin" in {c.spec for c in picked}


@requires_root
def test_a_user_lists_her_own_python_process_and_never_another_s(shared_program: Path) -> None:
    theirs = _running([sys.executable, str(shared_program), "30"])  # root's

    def as_nobody() -> bytes:
        mine = _running([sys.executable, str(shared_program), "30"])
        try:
            own = python_object(mine.pid)
            other = python_object(theirs.pid)
        finally:
            mine.kill()
            mine.wait()
        return json.dumps([own is not None and len(own["python_functions"]), other]).encode()

    try:
        code, data = run_as(NOBODY, as_nobody)
    finally:
        theirs.kill()
        theirs.wait()
    assert code == 0, data.decode()
    assert json.loads(data) == [5, None]


def test_list_pid_shows_python_functions_first(
    shared_program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = _running([sys.executable, str(shared_program), "30"])
    try:
        status = main(["list", "--pid", str(proc.pid), "--functions", "--json", "Model.*"])
    finally:
        proc.kill()
        proc.wait()
    assert status == 0
    first = json.loads(capsys.readouterr().out)["objects"][0]
    assert [f["name"] for f in first["python_functions"]] == ["Model.big"]
    assert os.path.samefile(first["path"], shared_program)


def test_a_path_with_glob_characters_is_named_by_a_spec_that_matches_it_alone() -> None:
    folder = Path(tempfile.mkdtemp(prefix="adaptyst-[py]*"))
    try:
        program = folder / "app?.py"
        program.write_text("def f():\n    pass\nimport time\ntime.sleep(30)\n")
        proc = _running([sys.executable, str(program)])
        try:
            obj = python_object(proc.pid)
        finally:
            proc.kill()
            proc.wait()
    finally:
        shutil.rmtree(folder)
    assert obj is not None
    spec = parse_spec(obj["python_functions"][0]["spec"])
    assert spec.file is not None and fnmatch.fnmatchcase(str(program), spec.file)
    assert not fnmatch.fnmatchcase(str(folder / "appX.py"), spec.file)
