"""What a launched command's environment gets from its probes' kinds, and the line that
says when a variable of the user's is put aside (the CUDA driver loads one injection
library; OpenCL's loader takes a list of layers, so the user's are kept)."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.kinds.cuda import BUDGET_ENV, INJECTION_ENV, inject_path
from adaptyst_top.collectors.probes.kinds.opencl import LAYERS_ENV, layer_path
from adaptyst_top.runtime.command_env import command_env

OTHER = "/opt/profiler/lib/libinjection.so"


def built(path: str | None) -> str:
    if path is None:
        pytest.fail("this install has no device libraries: install with the test extra")
    return path


def test_a_users_cuda_injection_library_is_replaced_and_one_line_says_so() -> None:
    ours = built(inject_path())
    added, notes = command_env([parse_spec("cuda:*")], 0.02, {INJECTION_ENV: OTHER})
    assert added[INJECTION_ENV] == ours
    assert len(notes) == 1 and OTHER in notes[0] and INJECTION_ENV in notes[0]
    assert notes[0].startswith("cuda:*: ")


@pytest.mark.parametrize("before", [None, "", "ours", "budget"])
def test_nothing_is_said_where_nothing_of_the_users_is_lost(before: str | None) -> None:
    ours = built(inject_path())
    env = {} if before is None else {INJECTION_ENV: ours if before == "ours" else before}
    if before == "budget":  # the tool's own variable, set by hand: nothing of another's
        env = {BUDGET_ENV: "0.5"}
    specs = [parse_spec("cuda:*"), parse_spec("cuda:_Z6*")]  # the second sets the same
    added, notes = command_env(specs, 0.02, env)
    assert added[INJECTION_ENV] == ours and notes == ()


def test_opencl_layers_of_the_users_are_kept_and_nothing_is_said() -> None:
    ours = built(layer_path())
    added, notes = command_env([parse_spec("opencl:*")], 0.02, {LAYERS_ENV: f"{OTHER}::/opt/b.so"})
    assert added[LAYERS_ENV].split(":") == [OTHER, "/opt/b.so", ours] and notes == ()


def test_a_replaced_value_is_shown_inert_and_short() -> None:
    value = "/opt/x\x1b]0;owned\x07.so\n" + "y" * 500
    spec = parse_spec("cuda:" + "k" * 100)  # the longest a spec may be, near enough
    _, notes = command_env([spec], 0.02, {INJECTION_ENV: value})
    assert len(notes) == 1 and "\x1b" not in notes[0] and "\n" not in notes[0]
    assert "\\x1b" in notes[0] and len(notes[0]) < 400
