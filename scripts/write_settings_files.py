"""Write docs/config.toml and systemd/agent.toml from the settings' declarations.

    .venv/bin/python scripts/write_settings_files.py

tests/unit/runtime/test_settings_model.py fails when either file is not what this writes."""

from __future__ import annotations

from pathlib import Path

from adaptyst_top.runtime import config
from adaptyst_top.runtime.remote import settings as agent_settings
from adaptyst_top.runtime.settings_model import commented

ROOT = Path(__file__).resolve().parent.parent
FILES = {
    ROOT / "docs" / "config.toml": commented(config.Config, config.HEADER),
    ROOT / "systemd" / "agent.toml": commented(agent_settings.AgentSettings, agent_settings.HEADER),
}

if __name__ == "__main__":
    for path, text in FILES.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
