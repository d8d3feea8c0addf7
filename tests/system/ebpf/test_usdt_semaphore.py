"""Semaphore-gated USDT probes: the kernel raises the semaphore while the probe is
attached and lowers it when it goes, on every exit path (SIGKILL of the monitor
included); counts are exact; a launched command's gated probes work from its start."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.collectors.probes.helpers.build import HelperProcess
from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.workload import build_c

pytestmark = [pytest.mark.ebpf, requires_root]
SOURCE = TARGETS / "gated.c"


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_c(SOURCE, tmp_path_factory.mktemp("gated"))


class Target(HelperProcess):
    """The gated program, answering "sem" and "hit N" line by line."""

    @property
    def pid(self) -> int:
        return self.proc.pid


def spec(binary: Path) -> str:
    return f"usdt:{binary}:adaptyst_gated:tick"


def test_the_kernel_holds_the_semaphore_while_attached(gated: Path) -> None:
    t = Target(gated)
    try:
        assert t.ask("sem") == "0"
        with ProbeEngine(pid=t.pid) as engine:
            group = engine.add(spec(gated))
            assert engine.wait(60) and group.state == "attached", group.error
            assert t.ask("sem") == "1"
            assert t.ask("hit 500") == "500"
            engine.read()
            assert group.rows[0].stats[None][0] == 500
        assert t.ask("sem") == "0"  # lowered when the probe went
    finally:
        t.close()
    assert none_left()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_a_killed_monitor_leaves_the_semaphore_down(gated: Path, sig: int) -> None:
    t = Target(gated)
    try:
        rec = subprocess.Popen(
            [*CLI, "record", "--interval", "0.2", "--pid", str(t.pid), "--probe", spec(gated)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert rec.stdout is not None
        rec.stdout.readline()
        assert t.ask("sem") == "1"
        rec.send_signal(sig)
        rec.wait(30)
        deadline = time.monotonic() + 10
        while t.ask("sem") != "0" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert t.ask("sem") == "0"
        assert t.ask("hit 10") == "0"  # the site is off again: the target runs as before
    finally:
        t.close()
    assert none_left()


def test_node_wide_and_launched_gated_probes_count_exactly(gated: Path, tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/sh\nprintf 'sem\\nhit 300\\n' | {gated}\n")
    script.chmod(0o755)
    out = tmp_path / "rec.jsonl"
    r = subprocess.run(
        [*CLI, "record", "--out", str(out), "--probe", spec(gated), "--", str(gated)],
        input="sem\nhit 300\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ready", "1", "300"]
    last = json.loads(out.read_text().splitlines()[-1])
    assert [p["count"] for p in last["probes"]] == [300]
    with ProbeEngine() as engine:  # no PID: every process that maps the binary
        group = engine.add(spec(gated))
        assert engine.wait(60) and group.state == "attached", group.error
        t = Target(gated)
        try:
            assert t.ask("sem") == "1" and t.ask("hit 200") == "200"
            engine.read()
            assert group.rows[0].stats[None][0] == 200
        finally:
            t.close()
    assert none_left()


def test_a_gated_probe_split_by_argument_holds_the_semaphore_once(gated: Path) -> None:
    t = Target(gated)
    try:
        with ProbeEngine(pid=t.pid) as engine:
            group = engine.add(spec(gated) + "@arg1")
            assert engine.wait(60) and group.state == "attached", group.error
            assert t.ask("sem") == "1"  # bcc's own +1 was taken back; the kernel's holds
            assert t.ask("hit 3") == "3"
            engine.read()
            assert {k: v[0] for k, v in group.rows[0].stats.items()} == {0: 1, 1: 1, 2: 1}
        assert t.ask("sem") == "0"
    finally:
        t.close()
    assert none_left()
