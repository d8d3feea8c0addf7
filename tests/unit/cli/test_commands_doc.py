"""docs/commands.md names every option of every command (a newcomer found `--profile`,
`--profile-hz` and `export --folded`/`--off` in the help only)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

import pytest

from adaptyst_top.cli.agent import agent_parser, bridge_parser
from adaptyst_top.cli.cluster import cluster_parser
from adaptyst_top.cli.demo import demo_parser
from adaptyst_top.cli.doctor import doctor_parser
from adaptyst_top.cli.listing import list_parser
from adaptyst_top.cli.monitor import monitor_parser
from adaptyst_top.cli.record import export_parser, record_parser
from adaptyst_top.cli.replay import replay_parser
from tests.support.paths import REPO

PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "monitor": monitor_parser,
    "record": record_parser,
    "export": export_parser,
    "list": list_parser,
    "replay": replay_parser,
    "cluster": cluster_parser,
    "agent": agent_parser,
    "bridge": bridge_parser,
    "demo": demo_parser,
    "doctor": doctor_parser,
}


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_option_is_in_the_commands_reference(command: str) -> None:
    doc = (REPO / "docs" / "commands.md").read_text()
    options = {
        o
        for action in PARSERS[command]()._actions
        if action.help != argparse.SUPPRESS
        for o in action.option_strings
        if o.startswith("--")
    }
    missing = sorted(o for o in options if not re.search(rf"(?<![\w-]){o}(?![\w-])", doc))
    assert missing == [], f"docs/commands.md lacks {command}'s {missing}"
