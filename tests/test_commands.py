"""The one command table (cli/commands.py): usage, help and dispatch all come from it."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from adaptyst_top.cli.commands import COMMANDS, Command

CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]


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
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    rows = dict(
        line.strip("|").split("|")[:2]
        for line in readme.splitlines()
        if line.startswith("| `adaptyst-top ")
    )
    for c in COMMANDS:
        assert rows.get(f" `adaptyst-top {c.name}` ", "").strip() == c.summary, c.name
    assert len(readme.splitlines()) <= 250
