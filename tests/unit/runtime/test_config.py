"""Settings merge as documented: the command line over the config file over the
defaults; every option reaches every engine the session makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.cli.monitor import monitor_parser
from adaptyst_top.collectors.probes.cost.overhead import DEFAULT_BUDGET
from adaptyst_top.runtime.config import load_config, merged_settings
from tests.support.paths import DATA


@pytest.mark.parametrize(
    ("argv", "interval", "budget"),
    [
        (["--interval=2"], 2.0, 0.05),  # the = spelling once lost to the config file
        (["--interval", "2", "--budget=1"], 2.0, 0.01),
        ([], 5.0, 0.05),
    ],
)
def test_command_line_over_config_over_defaults(
    tmp_path: Path, argv: list[str], interval: float, budget: float
) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("refresh = 5\nbudget = 5\n")
    args = monitor_parser().parse_args(argv)
    assert merged_settings(args.interval, args.budget, load_config(cfg)) == (
        interval,
        pytest.approx(budget),
    )


def test_defaults_without_a_config(tmp_path: Path) -> None:
    args = monitor_parser().parse_args([])
    assert merged_settings(args.interval, args.budget, load_config(tmp_path / "none.toml")) == (
        1.0,
        DEFAULT_BUDGET,
    )


def test_the_one_engine_factory_passes_every_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root: the environment check and the calibration child are the only parts
    replaced; the engine is the real one, built by the factory every path uses."""
    from adaptyst_top.collectors.probes.cost import calibration
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
    from adaptyst_top.runtime import session as session_mod
    from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions

    monkeypatch.setattr(ProbeEngine, "require_ebpf", staticmethod(lambda: None))
    calibrated = []

    class NoCalibration:
        def __init__(self, table: object) -> None:
            calibrated.append(table)

        def close(self) -> None:
            pass

    monkeypatch.setattr(calibration, "BackgroundCalibration", NoCalibration)
    probing = ProbeSettings(budget=0.001, enforce_budget=True, max_probes=7)
    opts = SessionOptions(probing=probing)
    session = session_mod.open_session(opts)  # no probe: no engine yet
    try:
        assert session.engine is None
        engine = session.ensure_engine()  # as the TUI's `a` starts it
        assert (engine.budget, engine.enforce_budget, engine.max_attach) == (0.001, True, 7)
        assert calibrated == [engine.costs]  # calibration fills the engine's own table
        assert session.ensure_engine() is engine and session.hub.engine is engine
    finally:
        session.close()


RECORDING = DATA / "recording.jsonl"
DEEP = "a = " + "[" * 5000 + "]" * 5000 + "\n"


@pytest.mark.parametrize("what", ["fifo", "deep", "huge", "folder"])
@pytest.mark.parametrize("command", ["replay", "agent"])
def test_a_config_that_is_not_one_is_one_line_and_no_wait(
    tmp_path: Path, what: str, command: str
) -> None:
    """A FIFO with no writer once hung the monitor; 5,000 levels of nesting were a
    traceback. Each is one line and exit status 1, at once."""
    import os
    import subprocess
    import sys

    cfg = tmp_path / "config.toml"
    if what == "fifo":
        os.mkfifo(cfg)
    elif what == "deep":
        cfg.write_text(DEEP)
    elif what == "huge":
        cfg.write_text("# padding\n" * 200_000)
    else:
        cfg.mkdir()
    argv = [str(RECORDING)] if command == "replay" else ["--socket", str(tmp_path / "s")]
    done = subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", command, *argv, "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and str(cfg) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
