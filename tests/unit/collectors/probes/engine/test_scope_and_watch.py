"""The engine's scope and its watch, with real processes and a fake attacher and
follower in place of BPF: who joins (children, refused ones), who leaves (exits, an
exec into someone else's), when the target's end ends the probes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from adaptyst_top.collectors.probes.engine.process_follow import ProcessEvent
from adaptyst_top.collectors.probes.engine.scope import Scope
from adaptyst_top.collectors.probes.engine.state import EngineState
from adaptyst_top.collectors.probes.engine.watch import ScopeWatch
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.system.targets import process_start


class FakeAttacher:
    """What the watch asks of the attacher, recorded: no BPF program is touched."""

    def __init__(self) -> None:
        self.attached: list[tuple[list[int], int]] = []
        self.detached: list[tuple[list[int], int]] = []
        self.off: list[tuple[int, str]] = []

    def attach_rows_pid(self, rows: list, pid: int) -> None:  # type: ignore[type-arg]
        self.attached.append(([r.id for r in rows], pid))

    def detach_pid(self, rows: list, pid: int) -> None:  # type: ignore[type-arg]
        self.detached.append(([r.id for r in rows], pid))

    def switch_off(self, row: object, state: str) -> None:
        self.off.append((getattr(row, "id", -1), state))


class FakeFollower:
    def __init__(self) -> None:
        self.added: list[int] = []
        self.discarded: list[int] = []

    def add(self, pid: int) -> None:
        self.added.append(pid)

    def discard(self, pid: int) -> None:
        self.discarded.append(pid)

    def close(self) -> None:
        pass


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes of this test's own, ended with it."""
    made: list[subprocess.Popen[bytes]] = []
    yield made
    for p in made:
        p.kill()
        p.wait()


def spawn(made: list[subprocess.Popen[bytes]]) -> int:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    made.append(p)
    return p.pid


def watch_of(
    target: int, others: list[int] | None = None, admit: object = None
) -> tuple[EngineState, Scope, ScopeWatch, FakeAttacher, FakeFollower]:
    state = EngineState()
    scope = Scope(state, target, others, admit, None)  # type: ignore[arg-type]
    attacher, follower = FakeAttacher(), FakeFollower()
    watch = ScopeWatch(state, scope, attacher, None)  # type: ignore[arg-type]
    watch.follower = follower  # type: ignore[assignment]
    return state, scope, watch, attacher, follower


def test_a_scope_holds_each_process_with_its_start(children: list) -> None:  # type: ignore[type-arg]
    target, other = spawn(children), spawn(children)
    _state, scope, *_ = watch_of(target, [other])
    assert scope.starts == {target: process_start(target), other: process_start(other)}
    assert sorted(scope.attach_pids()) == sorted([target, other])
    assert scope.target().name == f"PID {target}" and set(scope.target().pids) == {target, other}
    children[1].kill()
    children[1].wait()
    # Gone: never attached for again, whoever gets its PID next.
    assert scope.attach_pids() == [target] and scope.exited() == [other]


def test_node_wide_probes_attach_for_every_process() -> None:
    scope = Scope(EngineState(), None, None, None, None)
    assert scope.attach_pids() == [-1] and scope.target().name == "every process"
    assert not scope.may_join(os.getpid())


def test_a_child_joins_once_and_takes_the_live_rows(children: list) -> None:  # type: ignore[type-arg]
    target = spawn(children)
    _state, scope, watch, attacher, follower = watch_of(target)
    assert watch.follow(child := spawn(children))
    assert not watch.follow(child)  # known already
    assert attacher.attached == [([], child)] and follower.added == [child]
    assert scope.joined == 1 and child in scope.pids()


def test_a_refused_process_is_told_and_never_taken(children: list) -> None:  # type: ignore[type-arg]
    target = spawn(children)
    state, scope, watch, attacher, _ = watch_of(target, admit=lambda pid: "not yours")
    other = spawn(children)
    assert not watch.follow(other)
    assert other not in scope.pids() and attacher.attached == []
    assert state.warnings == [f"PID {other} not probed: not yours"]


def test_an_exec_into_someone_elses_ends_its_probes_at_once(children: list) -> None:  # type: ignore[type-arg]
    target = spawn(children)
    verdict: dict[int, str | None] = {}
    state, scope, watch, attacher, follower = watch_of(target, admit=lambda p: verdict.get(p))
    child = spawn(children)
    assert watch.follow(child)
    row = state.new_row(parse_spec("uprobe:/bin/true:main"), "main", "/bin/true", "x", 0)
    row.pids.add(child)
    state.rows[row.id] = row
    verdict[child] = "setuid: now root's"
    watch._on_event(ProcessEvent("exec", child))
    assert child not in scope.pids() and follower.discarded == [child]
    assert attacher.detached == [([row.id], child)]  # before the event returns
    assert state.warnings[-1] == f"PID {child}: setuid: now root's; its probes ended"


def test_an_exit_is_detached_in_the_background(children: list) -> None:  # type: ignore[type-arg]
    target = spawn(children)
    state, scope, watch, attacher, _ = watch_of(target)
    child = spawn(children)
    watch.follow(child)
    watch._on_event(ProcessEvent("exit", child))
    assert child not in scope.pids() and attacher.detached == []
    work = state.queue.get_nowait()
    assert callable(work)
    work()
    assert attacher.detached == [([], child)]


def test_a_thread_is_not_a_process_to_follow(children: list) -> None:  # type: ignore[type-arg]
    _state, scope, watch, _attacher, follower = watch_of(os.getpid())
    got: list[int] = []
    ready, done = threading.Event(), threading.Event()

    def hold() -> None:
        got.append(threading.get_native_id())
        ready.set()
        done.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    ready.wait(10)
    try:
        watch._on_event(ProcessEvent("fork", got[0], os.getpid()))
        assert follower.discarded == [got[0]] and got[0] not in scope.pids()
    finally:
        done.set()
        t.join()


def test_the_targets_end_ends_the_probes_once_nothing_it_started_is_left(
    children: list,  # type: ignore[type-arg]
) -> None:
    target = spawn(children)
    state, _scope, watch, *_ = watch_of(target)
    child = spawn(children)
    watch.follow(child)
    children[0].kill()
    children[0].wait()
    with state.lock:
        assert watch.check() is None  # its child is still probed: said once
        assert watch.check() is None
    assert state.warnings == [
        f"target PID {target} exited; the 1 process(es) it started are still probed"
    ]
    children[1].kill()
    children[1].wait()
    with state.lock:
        assert watch.check() == f"target PID {target} exited"
