"""The real CLI under hostile input: random specs, numbers and config values, closed
descriptors, signals at random points during attach. Whatever happens: at most one
line on stderr, never a traceback, an exit status of 0, 1, 2, 126 or 127 (or the
command's own), no process of ours left, no BPF program or tracefs entry left, and
kernel.bpf_stats_enabled as it was."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.support.cli import wait_started
from tests.support.marks import IS_ROOT
from tests.unit.cli.test_adversarial import (  # noqa: F401
    CLI,
    OK_STATUS,
    RUNS,
    STATS,
    check_clean,
    leftovers,
    run,
    stats_now,
)

# Spec text: the grammar's pieces mixed with junk, so that most examples are near misses.
_piece = st.sampled_from(
    [
        "uprobe",
        "usdt",
        "u",
        "c",
        "m",
        "/no/such",
        "/etc/passwd",
        "*",
        "x*",
        "mall?c",
        "@arg1",
        "@arg99",
        "@arg1:str",
        "..",
        ":",
        "::",
        "adaptyst",
        "task_begin",
        "a b",
        "(",
        "\x00",
        "é",
    ]
)


specs = st.lists(st.one_of(_piece, st.text(max_size=6)), min_size=1, max_size=6).map("".join)


@pytest.mark.skipif(not IS_ROOT, reason="probe specs are attached only as root")
@RUNS
@given(spec=specs)
def test_random_specs(spec: str) -> None:
    assume("\x00" not in spec)  # cannot be passed in argv at all
    marker = uuid.uuid4().hex
    before = stats_now()
    r = run(
        [
            "record",
            "--max-probes",
            "5",
            "--duration",
            "0.2",
            "--probe",
            spec,
            "--",
            "sh",
            "-c",
            f": {marker}; sleep 5",
        ]
    )
    assert r.returncode in OK_STATUS | {143}, r.stderr
    check_clean(r, marker, before)


@pytest.mark.ebpf
@pytest.mark.skipif(not IS_ROOT, reason="eBPF needs root")
@settings(max_examples=6, deadline=None)
# From the first line of cli/start.py on (wait_started): earlier, a SIGINT lands in the
# interpreter's own start-up (importing `site`), which no program written in Python can
# catch; from that line on it has its default effect, and later our handlers take it.
@given(
    delay=st.floats(0.0, 2.75), sig=st.sampled_from([signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
)
def test_signals_at_random_points_during_attach(delay: float, sig: int) -> None:
    marker = uuid.uuid4().hex
    before = stats_now()
    proc = subprocess.Popen(
        [
            *CLI,
            "record",
            "--probe",
            "uprobe:c:str*",
            "--probe",
            "uprobe:c:mem*",
            "--",
            "sh",
            "-c",
            f": {marker}; sleep 30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_started(proc.pid)
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    # Before the CLI's first line runs, a signal has its default effect (-sig): nothing
    # of ours existed yet.
    assert r.returncode in OK_STATUS | {143, -sig}, err
    check_clean(r, marker, before)
