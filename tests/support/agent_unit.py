"""The agent as its systemd unit runs it, and the test users it serves: for the tests that
start agents and for the benchmarks and scripts that make nodes."""

from __future__ import annotations

import pwd
import subprocess
from dataclasses import dataclass

from tests.support.paths import REPO

UNIT_FILE = REPO / "systemd" / "adaptyst-top-agent.service"


def with_the_units_capabilities() -> list[str]:
    """A command prefix that leaves root the capabilities the unit leaves the agent
    (CapabilityBoundingSet=), no others, and no_new_privs: every agent test checks
    that they are enough."""
    (caps,) = [
        line.split("=", 1)[1].split()
        for line in UNIT_FILE.read_text().splitlines()
        if line.startswith("CapabilityBoundingSet=")
    ]
    keep = ",".join(["-all", *(f"+{c.removeprefix('CAP_').lower()}" for c in caps)])
    return ["setpriv", f"--bounding-set={keep}", "--inh-caps=-all", "--no-new-privs", "--"]


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int


def useradd(name: str, shell: str = "/usr/sbin/nologin") -> User:
    subprocess.run(["useradd", "-M", "-s", shell, name], check=True)
    pw = pwd.getpwnam(name)
    return User(name, pw.pw_uid, pw.pw_gid)
