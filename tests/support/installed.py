"""adaptyst-top as a site installs it on a node, for tests that reach it over SSH: this
checkout's package, readable by every user, run by Debian's python3; and ending a daemon
a test started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from tests.support.paths import REPO


def install_checkout(d: Path, agent_socket: str, python: str = "/usr/bin/python3") -> Path:
    """The package under D/pkg and its launcher D/adaptyst-top, run by PYTHON, whose agent
    is at AGENT_SOCKET (a shell word: `$(hostname)` is the node's); the launcher."""
    shutil.copytree(
        REPO / "src" / "adaptyst_top",
        d / "pkg" / "adaptyst_top",
        ignore=shutil.ignore_patterns("*.so", "__pycache__"),
    )
    launcher = d / "adaptyst-top"
    launcher.write_text(
        "#!/bin/sh\n"
        f"export PYTHONPATH={d / 'pkg'} ADAPTYST_TOP_AGENT={agent_socket}\n"
        # Where a node's own adaptyst-top (a job's relay) finds it on the others: a
        # site's is on PATH.
        f'export ADAPTYST_TOP_REMOTE="${{ADAPTYST_TOP_REMOTE:-{launcher}}}"\n'
        f'exec {python} -m adaptyst_top.cli.start "$@"\n'
    )
    for folder, dirs, files in os.walk(d):  # readable by every user, as installed
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    launcher.chmod(0o755)
    return launcher


def end(p: subprocess.Popen[bytes] | None, wait_s: float = 15.0) -> None:
    """P ended: SIGTERM, then SIGKILL past WAIT_S."""
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(wait_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
