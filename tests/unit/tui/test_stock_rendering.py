"""The switch back to Textual's stock rendering (tui/textual_private.py): by the
environment, by the config file, and by itself when a private name is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adaptyst_top.runtime.config import Config, load_config
from adaptyst_top.tui import direct_paint, textual_private
from tests.support.paths import DATA

RECORDING = DATA / "recording.jsonl"
PROBE = """
from textual.drivers.linux_driver import LinuxDriver
from adaptyst_top.tui import textual_private as t
print(t.fast(), t.quiet(LinuxDriver).__name__, t.paint_lines(None, [0]), t.why_stock())
"""


@pytest.fixture
def fresh_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(textual_private.STOCK_ENV, raising=False)
    monkeypatch.setattr(textual_private, "_switch", textual_private._Switch())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "True QuietLinuxDriver False None"),
        ("0", "True QuietLinuxDriver False None"),
        ("1", f"False LinuxDriver False {textual_private.STOCK_ENV} is set"),
    ],
)
def test_the_environment_switches_the_fast_paths_off(value: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != textual_private.STOCK_ENV}
    if value is not None:
        env[textual_private.STOCK_ENV] = value
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    # paint_lines(None, ...) on the fast path would fail on None: stock never touches it.
    if value == "1":
        assert out.strip() == expected
    else:
        assert out.split()[:2] == expected.split()[:2]


def test_the_config_key_switches_them_off(tmp_path: Path, fresh_switch: None) -> None:
    from adaptyst_top.runtime.sources import ReplaySource
    from adaptyst_top.tui.app import MonitorApp

    path = tmp_path / "config.toml"
    path.write_text("stock_rendering = true\n")
    config = load_config(path)
    assert config.stock_rendering is True
    assert textual_private.fast()
    source = ReplaySource(str(RECORDING))
    try:
        MonitorApp(source, config=config)
    finally:
        source.close()
    assert not textual_private.fast()
    assert textual_private.why_stock() == "the config's stock_rendering"
    assert Config().stock_rendering is False


def test_a_private_name_gone_means_stock_from_then_on(
    monkeypatch: pytest.MonkeyPatch, fresh_switch: None
) -> None:
    def renamed(*_: object) -> bool:
        raise AttributeError("'App' object has no attribute '_driver'")

    monkeypatch.setattr(direct_paint, "paint_lines", renamed)
    assert textual_private.fast()
    assert textual_private.paint_lines(object(), [0]) is False  # type: ignore[arg-type]
    assert not textual_private.fast()
    assert "_driver" in (textual_private.why_stock() or "")
