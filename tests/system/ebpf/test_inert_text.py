"""Text from a target or a recording never acts on a terminal: a function whose symbol
holds escape sequences (set a pane's title, clear the screen) and a USDT key that does
too are shown with the escapes visible, in `list`, in `record` and in snapshots read
back; plain names are untouched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.snapshot.inert import inert
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.programs import EVIL


@pytest.mark.ebpf
@requires_root
def test_record_keeps_names_and_keys_inert(escapes_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    r = subprocess.run(
        [
            *CLI, "record", "--out", str(out), "--interval", "0.2",
            "--probe", f"uprobe:{escapes_bin}:evil*",
            "--probe", f"usdt:{escapes_bin}:adaptyst_esc:hit@arg1:str",
            "--", str(escapes_bin), "500",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stderr
    final = json.loads(out.read_text().splitlines()[-1])
    shown = {(p["name"], p.get("key")): p["count"] for p in final["probes"]}
    assert shown == {
        (inert(EVIL), None): 500,
        ("adaptyst_esc:hit", "key\\x1b]0;owned\\x07\\x1b[2J"): 500,
    }
