"""The real CLI under hostile input: random specs, numbers and config values, closed
descriptors, signals at random points during attach. Whatever happens: at most one
line on stderr, never a traceback, an exit status of 0, 1, 2, 126 or 127 (or the
command's own), no process of ours left, no BPF program or tracefs entry left, and
kernel.bpf_stats_enabled as it was."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.support.bpf_objects import none_left, uprobe_event_lines
from tests.support.cli import CLI
from tests.support.marks import IS_ROOT

STATS = Path("/proc/sys/kernel/bpf_stats_enabled")
OK_STATUS = {0, 1, 2, 126, 127}
RUNS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def leftovers(marker: str) -> list[int]:
    """Processes still running whose command line carries this run's marker."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(
                p.info["cmdline"] or []
            ):
                found.append(p.pid)
        except psutil.Error:
            continue
    return found


def check_clean(r: subprocess.CompletedProcess[str], marker: str, stats_before: str | None) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    ours = [ln for ln in r.stderr.splitlines() if marker not in ln]  # not the command's
    assert len(ours) <= 1, r.stderr
    deadline = time.monotonic() + 5
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leftovers(marker)
    if IS_ROOT:
        assert none_left()
        assert not uprobe_event_lines()
        assert STATS.read_text() == stats_before


def run(args: list[str], timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, **kw
    )


def stats_now() -> str | None:
    return STATS.read_text() if IS_ROOT else None


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["nan", "inf", "-inf", "1e-9", "1e300", "-1", "0", "x", "", "1_0", "0x10"]),
)


@RUNS
@given(
    value=numbers, flag=st.sampled_from(["--interval", "--duration", "--budget", "--max-probes"])
)
def test_random_numbers(value: object, flag: str) -> None:
    text = repr(value) if isinstance(value, float) else str(value)
    try:
        v = float(text)
        runs_long = flag == "--duration" and math.isfinite(v) and v > 1.0
        assume(not runs_long)
    except ValueError:
        pass
    marker = uuid.uuid4().hex
    before = stats_now()
    extra = [] if flag == "--duration" else ["--duration", "0.3"]
    r = run(
        [
            "record",
            "--interval",
            "0.1",
            *extra,
            flag,
            text,
            "--out",
            os.devnull,
            "--",
            "sh",
            "-c",
            f": {marker}; sleep 5",
        ],
        timeout=60,
    )
    assert r.returncode in OK_STATUS | {143}, r.stderr
    check_clean(r, marker, before)


toml_values = st.one_of(
    st.integers(),
    st.floats(),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.one_of(st.integers(), st.text(max_size=4)), max_size=3),
).map(lambda v: v)


def toml_literal(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    if isinstance(v, str):
        # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(toml_literal(x) for x in v) + "]"
    return str(v)


@settings(max_examples=200, deadline=None)
@given(
    key=st.sampled_from(
        [
            "refresh",
            "probes",
            "budget",
            "ascii",
            "theme",
            "cpu_power_model",
            "thresholds.util_warn",
            "thresholds.p99_warn_ms",
            "refersh",
            "colour",
        ]
    ),
    value=toml_values,
)
@example(key="budget", value=5e-324)  # found: 5e-324 % was a budget of 0
def test_random_config_values(
    tmp_path_factory: pytest.TempPathFactory, key: str, value: object
) -> None:
    from adaptyst_top.runtime.config import ConfigError, load_config

    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    table, _, name = key.rpartition(".")
    body = f"[{table}]\n" if table else ""
    path.write_text(body + f"{name} = {toml_literal(value)}\n")
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        line = str(exc)
        assert "\n" not in line and name in line and str(path) in line
        return
    for number in (cfg.refresh, cfg.budget, cfg.util_warn, cfg.p99_warn_ms):
        assert isinstance(number, float) and math.isfinite(number)
    assert 0.05 <= cfg.refresh <= 3600 and 0 < cfg.budget <= 1 and 0 < cfg.util_warn <= 1
    assert isinstance(cfg.ascii, bool) and all(isinstance(p, str) for p in cfg.probes)
    if name in ("refersh", "colour"):
        assert cfg.warnings and name in cfg.warnings[0]


@pytest.mark.parametrize("closed", [0, 1, 2])
def test_closed_descriptors(closed: int) -> None:
    marker = uuid.uuid4().hex
    before = stats_now()
    r = run(
        [
            "record",
            "--interval",
            "0.1",
            "--duration",
            "0.5",
            "--",
            "sh",
            "-c",
            f"echo {marker}; echo {marker} >&2",
        ],
        preexec_fn=lambda: os.close(closed),
    )
    assert r.returncode in (0, 143), r.stderr
    assert marker not in "".join(ln for ln in r.stdout.splitlines() if not ln.startswith("{"))
    check_clean(r, marker, before)
