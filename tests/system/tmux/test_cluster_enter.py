"""Enter on a node in the cluster view hands the terminal to that node's monitor and
takes it back: with no sshd there (and as a user, in a view started without --job) the
monitor's one-line error is shown and the view goes on, in a real terminal (tmux)."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from tests.support.terminal import Terminal
from tests.system.prometheus.test_cluster_hostile import Answer, server  # noqa: F401 - the fixture
from tests.system.prometheus.test_cluster_limits import by_query, sample


def one_node(promql: str) -> list[dict[str, object]]:
    if "timestamp(" in promql or "adaptyst_time_seconds" in promql:
        return [sample(str(time.time()), node="127.0.0.1")]
    return []


def test_enter_on_a_node_without_sshd_leaves_the_view_working(
    server: tuple[str, dict[str, Answer]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, behaviour = server
    behaviour["answer"] = by_query(one_node)
    done = tmp_path / "done"
    # Port 1: nothing listens, so ssh fails at once, as on a node without sshd.
    view = shlex.join(
        [sys.executable, "-m", "adaptyst_top.cli.start", "cluster", "--prometheus", url]
    )
    command = f"ADAPTYST_TOP_SSH='ssh -p 1 -o BatchMode=yes' {view}; echo $? > {done}; sleep 30"
    term = Terminal("cluster-enter")
    term.start(command, 100, 24)
    try:
        term.wait_for(lambda s: "127.0.0.1" in s and "asking" not in s, 30)
        term.keys("Enter")
        screen = term.wait_for(lambda s: "the monitor ended with status" in s, 30)
        assert "127.0.0.1: the monitor ended with status 1" in screen, screen
        term.keys("r")  # the view still takes keys
        time.sleep(1.0)
        assert not done.exists(), term.screen()
        term.keys("q")
        deadline = time.monotonic() + 10
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        screen = term.screen()
        assert done.read_text().strip() == "0", screen
        assert "Traceback" not in screen and "OSError" not in screen, screen
    finally:
        term.kill()
