"""A probed process's PID reused by another user's process: nothing of the new process
is read for the old one's session (the agent reads a USDT string key's text through
/proc/PID/mem, as root). Real users; the PID handed over with the kernel's own
ns_last_pid, so the attack happens every run, not 2 runs in 4."""

from __future__ import annotations

import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.bpf.keys import UNREADABLE, KeyResolver
from adaptyst_top.system.held_processes import HeldProcesses
from adaptyst_top.system.targets import process_start
from tests.support.marks import requires_root

# serial: sets kernel.ns_last_pid: any process started beside it takes the PID
pytestmark = [pytest.mark.serial, requires_root]
# Not position-independent: the string is at the same address in every process of it.
HOLDER = r"""
#include <stdio.h>
#include <string.h>
char text[64];
int main(int argc, char **argv) {
    strncpy(text, argv[1], sizeof text - 1);
    printf("%lu\n", (unsigned long)text);
    fflush(stdout);
    getchar();
    return 0;
}
"""


@pytest.fixture(scope="module")
def holder() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="adt-reuse-"))
    d.chmod(0o755)
    (d / "holder.c").write_text(HOLDER)
    subprocess.run(["gcc", "-no-pie", "-o", str(d / "holder"), str(d / "holder.c")], check=True)
    try:
        yield d / "holder"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def two_users() -> Iterator[tuple[pwd.struct_passwd, pwd.struct_passwd]]:
    tag = uuid.uuid4().hex[:6]
    names = [f"adt-ra-{tag}", f"adt-rb-{tag}"]
    for n in names:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", n], check=True)
    try:
        yield pwd.getpwnam(names[0]), pwd.getpwnam(names[1])
    finally:
        for n in names:
            subprocess.run(["userdel", n], check=False)


def start_as(user: pwd.struct_passwd, holder: Path, text: str) -> tuple[subprocess.Popen[str], int]:
    p = subprocess.Popen(
        [str(holder), text],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    return p, int(p.stdout.readline())


def start_with_pid(
    pid: int, user: pwd.struct_passwd, holder: Path, text: str
) -> tuple[subprocess.Popen[str], int]:
    """USER's holder with PID, as a PID-reuse loop would get it, at once."""
    for _ in range(200):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p, address = start_as(user, holder, text)
        if p.pid == pid:
            return p, address
        p.kill()
        p.wait()
    raise AssertionError(f"PID {pid} was not handed over in 200 tries")


def test_a_reused_pid_is_not_read_for_the_session_of_its_old_process(
    holder: Path, two_users: tuple[pwd.struct_passwd, pwd.struct_passwd]
) -> None:
    alice, bob = two_users
    mine, address = start_as(alice, holder, "alice-key")
    pid, start = mine.pid, process_start(mine.pid)
    assert start is not None
    held = HeldProcesses()  # the scope of alice's session: her process, as checked
    assert held.hold(pid, start)
    open_mem = partial(held.opened, name="mem")
    seen = KeyResolver({0: "str"}, open_mem)._resolve(pid, address, "str")
    assert seen == "alice-key"  # her own process's string is read
    resolver = KeyResolver({0: "str"}, open_mem)
    mine.kill()
    mine.wait()
    theirs, address_b = start_with_pid(pid, bob, holder, "bob-secret")
    try:
        assert address_b == address and theirs.pid == pid  # the same PID, the same address
        # Often the same start too, in clock ticks: a start time does not tell them apart.
        # What the agent reads for alice's key, with bob's process at her old PID:
        assert resolver._resolve(pid, address, "str") == UNREADABLE
        assert KeyResolver({}, open_mem)._resolve(pid, address, "auto") == address
        # A process the session never held is never read either.
        assert (
            KeyResolver({}, partial(HeldProcesses().opened, name="mem"))._resolve(
                pid, address, "str"
            )
            == UNREADABLE
        )
        assert not held.hold(pid, start) or process_start(pid) == start
    finally:
        theirs.kill()
        theirs.wait()
        held.release_all()
