"""A process gone before its stacks are unwound (a 30 ms run, gzip's 0.1 s ones): its
maps as read while its events came in, and its files as a live process that mapped the
same ones gave, name its frames (they were `[unknown]`: 7.5% of gzip's profile)."""

from __future__ import annotations

import os
import subprocess
import sys

from adaptyst_top.collectors.profile import maps as maps_mod
from adaptyst_top.collectors.profile.maps import ProcessMaps, read_maps
from adaptyst_top.collectors.profile.tally import Tally


def _gone_process_maps() -> tuple[int, list[maps_mod.Mapping]]:
    """A child's pid and maps, read while it lived; it has exited since."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"  # exec'd
        read = read_maps(child.pid)
    finally:
        child.communicate(b"")
    return child.pid, read


def test_a_gone_process_is_read_from_its_maps_as_last_seen() -> None:
    pid, seen = _gone_process_maps()
    assert seen and read_maps(pid) == []
    python = next(m for m in seen if m.path.startswith("/") and "python" in m.path)
    # The interpreter's file as this live process (the same program) mapped it: kept
    # by device, inode and path.
    mine = next(m for m in read_maps(os.getpid()) if m.file_key == python.file_key)
    live = ProcessMaps(os.getpid())
    elf, table = live.elf(mine), live.cfi(mine)
    assert elf is not None and not table.errors
    gone = ProcessMaps(pid, early=lambda: seen)
    found = gone.find(python.start)
    assert found == python
    assert gone.elf(found) is elf and gone.cfi(found) is table  # as the live one gave them
    assert ProcessMaps(pid).find(python.start) is None  # with nothing seen: nothing


def test_the_reader_reads_maps_again_when_a_stack_lies_outside_them() -> None:
    pid, seen = _gone_process_maps()
    tally = Tally()
    tally._early[pid] = []  # read before the exec mapped anything (a forked shell's)
    tally.seen(pid, seen[0].start)  # gone now: what was read stays, never worse
    assert tally._early[pid] == []
    me = os.getpid()
    tally.seen(me, read_maps(me)[0].start)
    assert tally._early[me] == read_maps(me)
