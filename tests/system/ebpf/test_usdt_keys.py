"""USDT probes split by a string argument: a key is never a pointer. Strings in read-only
data the target has not touched yet, on the heap and on the stack are counted exactly,
first hit included; what cannot be read is counted under <unreadable>."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.bpf.keys import UNREADABLE
from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root


def keyed_counts(binary: Path, suffix: str, tmp_path: Path) -> dict[object, int]:
    out = tmp_path / "rec.jsonl"
    spec = f"usdt:{binary}:adaptyst_keys:hit{suffix}"
    r = subprocess.run(
        [*CLI, "record", "--out", str(out), "--probe", spec, "--", str(binary), "250"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    last = json.loads(out.read_text().splitlines()[-1])
    return {p["key"]: p["count"] for p in last["probes"]}


@pytest.mark.ebpf
@requires_root
def test_string_keys_are_exact_from_every_kind_of_memory(keys_bin: Path, tmp_path: Path) -> None:
    counts = keyed_counts(keys_bin, "@arg1:str", tmp_path)
    assert counts == {
        "from-rodata": 250,  # its page was first touched by the probe's read
        "from-heap": 250,
        "from-stack-7": 250,
        UNREADABLE: 250,
    }
    assert none_left()


@pytest.mark.ebpf
@requires_root
def test_auto_keys_never_file_a_string_under_its_pointer(keys_bin: Path, tmp_path: Path) -> None:
    counts = keyed_counts(keys_bin, "@arg1", tmp_path)
    strings = {k: v for k, v in counts.items() if isinstance(k, str)}
    assert strings == {"from-rodata": 250, "from-heap": 250, "from-stack-7": 250}
    # The one value that points nowhere is, for an untyped argument, a number.
    assert [v for k, v in counts.items() if isinstance(k, int)] == [250]


@pytest.mark.ebpf
@requires_root
def test_a_missing_argument_is_named(keys_bin: Path) -> None:
    r = subprocess.run(
        [*CLI, "record", "--probe", f"usdt:{keys_bin}:adaptyst_keys:hit@arg5", "--", str(keys_bin)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert r.stderr.strip() == (
        f"adaptyst-top: usdt:{keys_bin}:adaptyst_keys:hit@arg5: adaptyst_keys:hit has 1 "
        "argument: there is no @arg5"
    )
