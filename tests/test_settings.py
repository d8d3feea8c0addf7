"""Settings merge as documented: the command line over the config file over the
defaults; every option reaches every engine the session makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.collectors.probe_engine import DEFAULT_BUDGET
from adaptyst_top.tui.cli import merged_settings, monitor_parser
from adaptyst_top.tui.config import load_config

from .conftest import requires_root


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
    assert merged_settings(args, load_config(cfg)) == (interval, pytest.approx(budget))


def test_defaults_without_a_config(tmp_path: Path) -> None:
    args = monitor_parser().parse_args([])
    assert merged_settings(args, load_config(tmp_path / "none.toml")) == (1.0, DEFAULT_BUDGET)


@pytest.mark.ebpf
@requires_root
def test_enforce_budget_reaches_an_engine_started_by_adding_a_probe(workload) -> None:  # type: ignore[no-untyped-def]
    from adaptyst_top.tui.session import SessionOptions, open_session

    session = open_session(SessionOptions(pid=workload.pid, enforce_budget=True, budget=0.001))
    try:
        assert session.engine is None  # no probe yet: started by the first `a`
        engine = session.ensure_engine()
        assert engine.enforce_budget and engine.budget == 0.001
    finally:
        session.close()
