"""One declaration per setting drives both files: the same checks and errors, an
unknown key warned in the user's file and refused in the agent's, and the commented
files in docs/ and systemd/ written from the declarations."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from adaptyst_top.runtime.config import Config, ConfigError, load_config
from adaptyst_top.runtime.remote.settings import AgentSettings, load_settings
from adaptyst_top.runtime.settings_model import settings_of
from scripts.write_settings_files import FILES
from tests.support.paths import REPO


@pytest.mark.parametrize("path", list(FILES), ids=lambda p: p.name)
def test_the_commented_files_are_what_the_declarations_write(path: Path) -> None:
    assert path.read_text() == FILES[path], "run scripts/write_settings_files.py"


def _uncommented(path: Path) -> str:
    return "\n".join(
        line[2:] if " = " in line else line
        for line in path.read_text().splitlines()
        if not line.startswith("# ") or " = " in line
    )


def test_every_default_the_files_state_is_the_models(tmp_path: Path) -> None:
    user = tmp_path / "config.toml"
    user.write_text(_uncommented(REPO / "docs" / "config.toml"))
    config = load_config(user)
    assert config.warnings == []
    assert dataclasses.replace(config, cpu_power_model=None, path=None) == Config()
    agent = tmp_path / "agent.toml"
    agent.write_text(_uncommented(REPO / "systemd" / "agent.toml"))
    assert dataclasses.replace(load_settings(str(agent)), cpu_power_model=None) == AgentSettings()
    for model in (Config, AgentSettings):
        for name, (_, s) in settings_of(model).items():
            assert s.help and " = " not in s.help, name  # the install test reads "k = v"


def _load(model: type, tmp_path: Path, body: str) -> Any:
    path = tmp_path / "settings.toml"
    path.write_text(body)
    return load_config(path) if model is Config else load_settings(str(path))


@pytest.mark.parametrize(
    ("model", "body", "message"),
    [
        (Config, "ascii = true\nrefresh = 0.01\n", ":2: refresh must be a finite number in 0.05..3600, not 0.01"),
        (Config, "ascii = 1\n", ":1: ascii must be true or false, not 1"),
        (Config, "probes = [1]\n", ":1: probes must be a list of strings, not [1]"),
        (Config, "budget = 0\n", ":1: budget must be a finite number > 0 and <= 100, not 0.0"),
        (Config, "thresholds = 3\n", ":1: thresholds must be a table, not 3"),
        (Config, "[thresholds]\nutil_warn = 2\n", ":2: thresholds.util_warn must be a finite number > 0"),
        (AgentSettings, "\nmax_clients = 1.5\n", ":2: max_clients must be a whole number, not 1.5"),
        (AgentSettings, "max_clients = 0\n", ":1: max_clients must be a finite number in 1..10000, not 0.0"),
        (AgentSettings, "socket = 3\n", ":1: socket must be a string, not 3"),
        (AgentSettings, 'probe_metrics = "some"\n', ":1: probe_metrics must be one of none, jobs, all, not 'some'"),
        (AgentSettings, "hello_timeout_s = nan\n", ":1: hello_timeout_s must be a finite number in 0.1..600, not nan"),
        (AgentSettings, "max_client = 3\n", ":1: unknown key max_client (did you mean max_clients?)"),
        (AgentSettings, "zzz = 3\n", ":1: unknown key zzz (known: admin_group, "),
    ],
)  # fmt: skip
def test_a_bad_key_is_one_line_naming_file_line_and_reason(
    tmp_path: Path, model: type, body: str, message: str
) -> None:
    with pytest.raises(ValueError) as e:
        _load(model, tmp_path, body)
    text = str(e.value)
    assert "\n" not in text and text.startswith(str(tmp_path / "settings.toml") + ":"), text
    assert message in text, text
    assert model is not Config or isinstance(e.value, ConfigError)


def test_an_unknown_user_key_is_a_warning_and_the_rest_is_read(tmp_path: Path) -> None:
    config = _load(Config, tmp_path, "refresh = 2\n[thresholds]\np99_warn = 5\n")
    assert config.refresh == 2.0 and config.p99_warn_ms == 100.0
    (warning,) = config.warnings
    assert warning.endswith(":3: unknown key p99_warn ignored (did you mean p99_warn_ms?)")


def test_values_are_held_as_the_model_declares_them(tmp_path: Path) -> None:
    config = _load(Config, tmp_path, "refresh = 2\nbudget = 5\n")
    assert type(config.refresh) is float and config.budget == pytest.approx(0.05)
    agent = _load(AgentSettings, tmp_path, "hello_timeout_s = 2\nmax_clients = 8.0\n")
    assert type(agent.hello_timeout_s) is float and agent.max_clients == 8
    assert type(agent.max_clients) is int
