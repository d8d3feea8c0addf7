"""Text from a target or a recording never acts on a terminal: a function whose symbol
holds escape sequences (set a pane's title, clear the screen) and a USDT key that does
too are shown with the escapes visible, in `list`, in `record` and in snapshots read
back; plain names are untouched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from adaptyst_top.snapshot import Snapshot
from adaptyst_top.snapshot.inert import inert
from tests.support.cli import CLI
from tests.support.programs import EVIL


def test_the_rule() -> None:
    assert inert("plain_fn::name<int>") == "plain_fn::name<int>"
    assert inert(EVIL) == "evil\\x1b]0;pwned\\x07\\x1b[2J"
    assert inert("a\u202eb\x9bc") == "a\\u202eb\\x9bc"


def test_list_shows_a_symbols_escapes_inert(escapes_bin: Path) -> None:
    r = subprocess.run(
        [*CLI, "list", "--binary", str(escapes_bin), "--functions", "evil*"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout
    assert inert(EVIL) in r.stdout


def test_a_recorded_or_served_snapshot_is_read_back_inert() -> None:
    """A recording, an agent or a remote node may send anything."""
    line = {
        "t": 1.0,
        "host": "n\x1b[2J",
        "warnings": ["w\x1b]0;x\x07"],
        "probes": [
            {"group": 1, "id": 0, "spec": "uprobe:x:f", "name": EVIL, "key": "k\x1b[2J",
             "state": "attached", "count": 3}
        ],
        "devices": [
            {"id": "gpu:0", "kind": "gpu", "name": "G\x1b[2J",
             "extra": {"processes": [{"pid": 7, "name": "p\x1b]0;x\x07"}]}}
        ],
    }  # fmt: skip
    snap = Snapshot.from_json(line)
    text = json.dumps(snap.to_json(), ensure_ascii=False)
    assert "\x1b" not in text and "\x07" not in text
    assert snap.probes[0].name == inert(EVIL) and snap.host == "n\\x1b[2J"
