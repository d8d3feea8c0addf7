"""The one command table (cli/commands.py): usage, help and dispatch all come from it."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from adaptyst_top.cli.commands import COMMANDS, Command
from tests.support.cli import CLI
from tests.support.paths import REPO


def test_help_lists_every_command_of_the_table() -> None:
    out = subprocess.run([*CLI, "--help"], capture_output=True, text=True, check=True).stdout
    usage, _, rest = out.partition("\n\n")
    listed = usage.split("{", 1)[1].split("}", 1)[0].split(",")
    assert listed == [c.name for c in COMMANDS]
    section = rest.split("subcommands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[0] for line in section] == [c.name for c in COMMANDS]
    for line, c in zip(section, COMMANDS, strict=True):
        assert line.split(None, 1)[1] == c.summary


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_command_dispatches_to_its_function(command: Command) -> None:
    module = importlib.import_module(f"adaptyst_top.cli.{command.module}")
    assert callable(getattr(module, command.function))
    done = subprocess.run([*CLI, command.name, "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: adaptyst-top {command.name}")


def test_an_unknown_word_is_the_monitor_s_usage_error() -> None:
    done = subprocess.run([*CLI, "--no-such-option"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "adaptyst-top: unrecognized arguments: --no-such-option (see --help)"
    ]


def test_the_readme_has_a_line_for_each_command() -> None:
    readme = (REPO / "README.md").read_text()
    rows = dict(
        line.strip("|").split("|")[:2]
        for line in readme.splitlines()
        if line.startswith("| `adaptyst-top ")
    )
    for c in COMMANDS:
        assert rows.get(f" `adaptyst-top {c.name}` ", "").strip() == c.summary, c.name
    assert len(readme.splitlines()) <= 250


def test_demo_refuses_a_command_it_would_drop() -> None:
    """`demo -- CMD` ran the demo's own workload and silently dropped CMD."""
    r = subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "demo", "--", "sleep", "30"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert "demo runs its own workload" in line and "-- sleep 30" in line


def test_the_gpu_check_fails_when_a_part_failed(tmp_path: Path) -> None:
    """experiments/gpu/gpu_check.py exited 0 when every part failed; its status is now the
    parts' (here the machine decides which: without a GPU, NVML's init fails)."""
    import json

    check = [sys.executable, "-m", "experiments.gpu.gpu_check", "--out", str(tmp_path)]
    r = subprocess.run(
        [*check, "--parts", "sweep"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = json.loads((tmp_path / "gpu_check.json").read_text())

    def has_failed(v: object) -> bool:  # a "failed" key at any depth
        if isinstance(v, dict):
            return "failed" in v or any(has_failed(x) for x in v.values())
        return isinstance(v, list) and any(has_failed(x) for x in v)

    failed = [k for k, v in result.items() if has_failed(v)]
    assert (r.returncode != 0) == bool(failed), (r.returncode, failed)
    if failed:
        assert f"part(s) failed: {', '.join(failed)}" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["record", "--fanout", "2", "--out", "/dev/null", "--", "true"],
        ["record", "--host", "n1", "--job", "7", "--fanout", "2", "--out", "/dev/null"],
        ["--fanout", "2", "--pid", "1"],
    ],
)
def test_a_fanout_without_a_jobs_nodes_is_one_line(args: list[str]) -> None:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "--fanout goes with --job from a login node" in line
