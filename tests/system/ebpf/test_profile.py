"""Sampled profiles for real: a target built without frame pointers, whose time is split
between functions by construction and which measures that split itself, recorded with
--profile and exported as folded stacks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.workload import build_c

SECONDS = 4


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("profiled")
    return build_c(TARGETS / "profiled.c", d, "-O2", "-fomit-frame-pointer", "-pthread")


def _export(recording: Path, *flags: str) -> dict[str, int]:
    out = subprocess.run(
        [*CLI, "export", str(recording), "--folded", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    stacks = {}
    for line in out.splitlines():
        stack, _, count = line.rpartition(" ")
        stacks[stack] = int(count)
    return stacks


@pytest.mark.ebpf
@requires_root
def test_shares_callers_and_sleep_as_the_target_measured_them(
    profiled: Path, tmp_path: Path
) -> None:
    rec = tmp_path / "rec.jsonl"
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--profile",
            "--interval",
            "0.5",
            "--out",
            str(rec),
            "--",
            str(profiled),
            str(SECONDS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = [json.loads(line) for line in rec.read_text().splitlines()]
    profile = lines[-1]["profile"]
    assert profile["hz"] == 99 and profile["lost"] == 0
    functions = {f["name"]: f for f in profile["functions"]}

    # Every thread's on-CPU time is the main thread's spinning, bar a few clock reads.
    spun = truth["outer_a"] + truth["outer_b"] + truth["heavy"]
    in_main = functions["main"]["total"]
    assert in_main >= 0.5 * 99 * spun  # sampled at about the rate asked for
    for name in ("outer_a", "outer_b", "heavy"):
        share = functions[name]["total"] / in_main
        assert abs(share - truth[name] / spun) <= 0.05, (name, share, truth)
    leaf_self = functions["leaf"]["self"] / in_main
    assert abs(leaf_self - (truth["outer_a"] + truth["outer_b"]) / spun) <= 0.05
    assert functions["heavy"]["self"] == pytest.approx(functions["heavy"]["total"], abs=2)

    # Callers found from the tables alone: the unwind reached the outermost frame.
    assert profile["complete"] >= 0.9 * profile["samples"]

    # Off the CPU: the sleeper's time, against what it summed itself.
    off_s = functions["sleeper_wait"]["off_ns"] / 1e9
    assert off_s == pytest.approx(truth["slept"], rel=0.10)

    on = _export(rec)
    assert sum(on.values()) == profile["samples"]
    a = sum(v for k, v in on.items() if k.endswith("main;outer_a;leaf"))
    assert a == pytest.approx(functions["outer_a"]["total"], abs=2)
    off = _export(rec, "--off")
    slept = sum(v for k, v in off.items() if ";sleeper_wait;" in k)
    assert slept / 1e9 == pytest.approx(truth["slept"], rel=0.10)
    assert none_left()


@pytest.mark.ebpf
@requires_root
def test_profile_without_a_target_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "record", "--profile", "--duration", "1", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0 and "--profile needs a target" in proc.stderr


def test_export_folded_of_a_recording_without_a_profile_is_one_line(tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps({"t": 1.0, "host": "h", "schema_version": 1}) + "\n")
    proc = subprocess.run(
        [*CLI, "export", str(rec), "--folded"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert "no profile in it" in proc.stderr and proc.stderr.count("\n") == 1
