"""End to end, as a user over SSH would: the installed adaptyst-top in tmux at 80x24
against a real probed target; read the screen, switch a probe off, quit with q, and
check that nothing is left in the kernel."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from adaptyst_top.runtime.model_store import DIR_ENV
from tests.support.bpf_objects import none_left, uprobe_event_lines
from tests.support.terminal import Terminal

pytestmark = [
    pytest.mark.ebpf,
    pytest.mark.skipif(os.geteuid() != 0, reason="eBPF needs root"),
]

CLI = Path(sys.executable).parent / "adaptyst-top"
SESSION = "adaptyst-e2e"


TERM = Terminal(SESSION)


def pane_pid() -> int:
    return TERM.pane_pid()


def screen() -> str:
    return TERM.screen()


def wait_for(what: Callable[[str], bool], timeout: float = 60.0) -> str:
    return TERM.wait_for(what, timeout)


def running(binary: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(proc / "exe") == str(binary.resolve()):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def line_of(text: str, word: str) -> str:
    return next((ln for ln in text.splitlines() if word in ln), "")


def start_monitor(workload_bin: Path) -> None:
    """The monitor at 80x24 over the workload, its exit status echoed after it."""
    assert shutil.which("tmux"), "tmux is installed by `make setup`"
    assert CLI.exists()
    command = (
        f"{CLI} --probe 'uprobe:{workload_bin}:fast_fn' "
        f"--probe 'usdt:{workload_bin}:adaptyst_test:task_begin..task_end@arg1' "
        f"-- {workload_bin} forever 300; echo EXITED $?; sleep 30"
    )
    TERM.start(command, 80, 24)


def test_monitor_in_tmux_80x24(workload_bin: Path) -> None:
    start_monitor(workload_bin)
    try:
        text = wait_for(lambda s: "fast_fn" in s and "spmv" in s)
        assert "attached" in line_of(text, "fast_fn")
        assert "Devices" in text and "Probes" in text and "Advisor" in text
        assert all(len(ln) <= 80 for ln in text.splitlines())
        # Rows move as their total time changes (the hot one first): the filter leaves
        # fast_fn alone, under the cursor.
        TERM.keys("/")
        wait_for(lambda s: "filter probes" in s, 15)
        TERM.keys("fast_fn")
        wait_for(lambda s: "fast_fn" in s.split("filter probes", 1)[-1], 15)
        TERM.keys("Enter")
        wait_for(lambda s: "1 of 3 rows match fast_fn" in s, 15)
        TERM.keys("Space")
        wait_for(lambda s: "detached" in line_of(s, "fast_fn"), 15)
        # A lone Escape is told from the start of a key sequence only by a timeout: the
        # input thread, which sleeps until input comes, must still wake for it.
        TERM.keys("?")
        wait_for(lambda s: "adaptyst-top keys" in s, 15)
        TERM.keys("Escape")
        wait_for(lambda s: "adaptyst-top keys" not in s and "fast_fn" in s, 5)
        TERM.keys("q")
        text = wait_for(lambda s: "EXITED" in s, 30)
        assert "EXITED 0" in text
        assert none_left()
        assert not uprobe_event_lines()
        # The command it launched went with it.
        assert not running(workload_bin)
    finally:
        TERM.kill()


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_signal_ends_the_monitor_on_screen_and_leaves_nothing(
    workload_bin: Path, sig: int
) -> None:
    """A closed SSH session (SIGHUP) or a kill ends the monitor like q does, though its
    input thread sleeps until a key comes: the driver's stop wakes it."""
    start_monitor(workload_bin)
    try:
        wait_for(lambda s: "fast_fn" in s and "spmv" in s)
        monitor = next(p for p in psutil.Process(pane_pid()).children() if "adaptyst" in p.name())
        monitor.send_signal(sig)
        text = wait_for(lambda s: "EXITED" in s, 30)
        assert "EXITED 0" in text and "Traceback" not in text
        assert none_left()
        assert not uprobe_event_lines()
        assert not running(workload_bin)
    finally:
        TERM.kill()


def test_closing_the_terminal_leaves_nothing(workload_bin: Path) -> None:
    """tmux kill-session takes the terminal away, as a dropped SSH connection does: the
    kernel sends SIGHUP and SIGCONT. The monitor goes, with its probes and command
    (its input thread once kept it alive after it had cleaned up)."""
    start_monitor(workload_bin)
    try:
        wait_for(lambda s: "fast_fn" in s and "spmv" in s)
        monitor = next(p for p in psutil.Process(pane_pid()).children() if "adaptyst" in p.name())
    finally:
        TERM.kill()
    gone, alive = psutil.wait_procs([monitor], timeout=30)
    assert gone and not alive, [t.id for p in alive for t in p.threads()]
    assert none_left()
    assert not uprobe_event_lines()
    assert not running(workload_bin)


def test_the_commands_output_goes_to_a_private_file_removed_at_exit(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    command = (
        f"{CLI} -- sh -c 'echo $$ > {marker}; echo from-the-command; exec sleep 300'; "
        "echo EXITED $?; sleep 30"
    )
    TERM.start(command, 120, 30)
    try:
        text = wait_for(lambda s: "output:" in s)
        log = Path(line_of(text, "output:").split("output:", 1)[1].split()[0])
        assert log.parent == Path("/run/adaptyst-top")  # root's private runtime folder
        st = log.stat()
        assert st.st_uid == 0 and st.st_mode & 0o077 == 0
        assert wait_for_file(marker)
        pid = int(marker.read_text())
        TERM.keys("q")
        text = wait_for(lambda s: "EXITED" in s, 30)
        assert "EXITED 0" in text and "from-the-command" in text  # its last lines, shown
        assert not log.exists()
        assert not Path(f"/proc/{pid}").exists()  # the command went with the monitor
    finally:
        TERM.kill()


def wait_for_file(path: Path, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return True
        time.sleep(0.1)
    return False


def test_the_live_demo_shows_the_task_table_and_a_move_in_tmux(tmp_path: Path) -> None:
    """`adaptyst-top demo` as a newcomer runs it, at 120x40: within a minute and a half the
    advisor pane has its task table and a move in the log, with the gain predicted."""
    # COLUMNS and LINES, when pytest's environment has them, override the terminal's.
    # Its own kept models: it neither starts from nor leaves what other tests learned.
    command = f"env -u COLUMNS -u LINES {DIR_ENV}={tmp_path} {CLI} demo; echo EXITED $?; sleep 30"
    TERM.start(command, 120, 40)
    try:
        arrow = " → "

        def moved(line: str) -> bool:  # a gain predicted or, once it ran there, measured
            return arrow in line and "%" in line

        text = wait_for(lambda s: "Time per run" in s and any(map(moved, s.splitlines())), 90)
        header = line_of(text, "Time per run")
        assert all(w in header for w in ("Task", "On", "Best", "Gain", "State")), header
        move = next(ln for ln in text.splitlines() if moved(ln))
        assert any(f"{arrow}{d}" in move for d in ("opencl", "cpu")), move
        assert all(len(ln) <= 120 for ln in text.splitlines())
        TERM.keys("q")
        assert "EXITED 0" in wait_for(lambda s: "EXITED" in s, 30)
        assert none_left()
    finally:
        TERM.kill()
