"""The agent under systemd's notify protocol, with a socket of the test's own standing
in for systemd's: READY=1 once it listens, WATCHDOG=1 while it runs, none while it is
stopped (SIGSTOP: systemd then kills and restarts it, WatchdogSec=), again after
SIGCONT, STOPPING=1 on SIGTERM; and the unit's sandbox rates ≤ 4.0 (systemd-analyze:
setup installs systemd)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.agent_unit import UNIT_FILE, with_the_units_capabilities
from tests.support.marks import requires_root
from tests.system.agent.test_agent import CLI

pytestmark = [pytest.mark.ebpf, requires_root]
PERIOD_S = 1.0


def _heard(sock: socket.socket, within: float) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            got.append(sock.recv(256).decode())
        except TimeoutError:
            break
    return got


def _next(sock: socket.socket, within: float) -> str | None:
    sock.settimeout(within)
    try:
        return sock.recv(256).decode()
    except TimeoutError:
        return None


def test_the_watchdog_is_fed_only_while_the_agent_runs() -> None:
    folder = Path(tempfile.mkdtemp(prefix="adt-notify-"))
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind(str(folder / "notify"))
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(folder / "notify"),
        "WATCHDOG_USEC": str(int(PERIOD_S * 1e6)),
    }
    agent = subprocess.Popen(
        [*with_the_units_capabilities(), *CLI, "agent", "--socket", str(folder / "agent.sock")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert _next(systemd, 60.0) == "READY=1"
        assert "WATCHDOG=1" in _heard(systemd, 2 * PERIOD_S)
        agent.send_signal(signal.SIGSTOP)
        _heard(systemd, 0.3)  # what was on its way
        assert _heard(systemd, 1.5 * PERIOD_S) == []  # systemd would restart it now
        agent.send_signal(signal.SIGCONT)
        assert "WATCHDOG=1" in _heard(systemd, 2 * PERIOD_S)
        agent.send_signal(signal.SIGTERM)
        assert "STOPPING=1" in _heard(systemd, 10.0)
        assert agent.wait(30) == 0
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        systemd.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_units_sandbox_rates_at_most_4() -> None:
    r = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(UNIT_FILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    last = [line for line in r.stdout.splitlines() if "Overall exposure level" in line]
    assert last, r.stdout + r.stderr
    level = float(last[0].split(":")[1].split()[0])
    assert level <= 4.0, last[0]
