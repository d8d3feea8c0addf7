"""Opening a file whose path someone else chose: only a stored regular file is opened.
The kernel's interfaces that call themselves regular files (procfs, sysfs, tracefs'
trace_pipe: a read waits, or drains what others are owed) are refused by their
filesystem without being opened; so are devices, FIFOs and a last symbolic link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adaptyst_top.system.regular_files import open_regular_file


def test_a_stored_file_opens(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    opened = open_regular_file(str(f), 1 << 20)
    assert opened is not None
    fd, st = opened
    try:
        assert os.read(fd, 100) == b"x = 1\n" and st.st_size == 6
    finally:
        os.close(fd)


# Those this node has (tracefs where it is mounted).
INTERFACES = [
    p
    for p in (
        "/proc/self/status",
        "/proc/kmsg",
        "/sys/kernel/tracing/trace_pipe",
        "/sys/kernel/debug/tracing/trace_pipe",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/dev/null",
    )
    if os.path.lexists(p)
]


@pytest.mark.parametrize("path", INTERFACES)
def test_the_kernel_s_interfaces_are_never_opened(path: str) -> None:
    assert open_regular_file(path, 1 << 20) is None


def test_a_fifo_and_a_last_link_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert open_regular_file(str(fifo), 1 << 20) is None
    assert open_regular_file(str(tmp_path / "link"), 1 << 20) is None
