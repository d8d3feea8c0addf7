"""`agent` and `bridge` run where a site installed the package for the distribution's
interpreter: what they import must not need the engine's libraries (capstone,
pyelftools), as tests/system/sshd runs them with Debian's python3."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", ["bridge", "agent"])
def test_the_agents_commands_load_no_engine_library(command: str) -> None:
    code = (
        "import sys\n"
        "from adaptyst_top.cli.main import BY_NAME, _function\n"
        f"_function(BY_NAME['{command}'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('capstone', 'elftools', 'bcc'))\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
