"""The engine's compiler thread (engine/build.py) with a fake kind, a fake loader and a
fake attacher in place of BPF: what a spec becomes when its build fails at each step
(the error in one line, nothing left loaded), and that the thread outlives any failure
and stops when told."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from adaptyst_top.collectors.probes.engine import build as build_mod
from adaptyst_top.collectors.probes.engine.build import Builder
from adaptyst_top.collectors.probes.engine.scope import Scope
from adaptyst_top.collectors.probes.engine.state import EngineState
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.kinds.base import Plan
from adaptyst_top.collectors.probes.model import Attachment, ProbeGroup, Row

WAIT_S = 10.0


class FakeBpf:
    """A loaded object: its programs by name, and whether it was let go."""

    def __init__(self) -> None:
        self.funcs: dict[str, Any] = {}
        self.attached: list[str] = []
        self.cleaned = False

    def attach_program(self, name: str) -> None:
        self.attached.append(name)

    def cleanup(self) -> None:
        self.cleaned = True


@dataclass
class FakeKind:
    """A probe kind whose plan, load and attach steps fail where a test says."""

    name: str = "fake"
    bpf_object: str | None = "fake.bpf.o"
    fail_plan: Exception | None = None
    offset: int | None = 0x1000
    loaded_calls: list[str] = field(default_factory=list)

    def instead(self, ctx: Any, spec: Any) -> None:
        return None

    def target_name(self, spec: Any, pid: int | None) -> str:
        return str(spec.target)

    def plan(self, ctx: Builder, spec: Any, path: str, source: str, elf: Any) -> Plan:
        if self.fail_plan is not None:
            raise self.fail_plan
        rows = []
        for i, name in enumerate(("alpha", "beta")):
            row = ctx.new_row(spec, name, path, "emulated", i)
            row.attachments = [Attachment(f"entry_{i}", path, name, offset=self.offset)]
            row.fns = [f"entry_{i}"]
            rows.append(row)
        return Plan(rows, [])

    def loaded(self, module: Any, spec: Any, source: str, elf: Any) -> None:
        self.loaded_calls.append(spec.text)


class FakeAttacher:
    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.rows: list[str] = []

    def attach_row(self, row: Row) -> None:
        if row.name == self.fail_on:
            raise OSError(f"attaching {row.name}: Device or resource busy")
        row.state, row.linked = "attached", True
        self.rows.append(row.name)

    def attach_rows_pid(self, rows: list[Row], pid: int) -> None:
        pass


@dataclass
class Loads:
    """What the fake loader was asked, and what it handed out."""

    fail: OSError | None = None
    made: list[FakeBpf] = field(default_factory=list)


@pytest.fixture
def kind(monkeypatch: pytest.MonkeyPatch) -> FakeKind:
    fake = FakeKind()
    monkeypatch.setattr(build_mod, "kind_of", lambda spec: fake)
    # Every spec's file is this interpreter: a real ELF, read as the engine reads it.
    monkeypatch.setattr(build_mod, "resolve_target", lambda target, pid: sys.executable)
    return fake


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Loads:
    seen = Loads()

    def load(*args: Any) -> FakeBpf:
        if seen.fail is not None:
            raise seen.fail
        bpf = FakeBpf()
        seen.made.append(bpf)
        return bpf

    monkeypatch.setattr(build_mod, "load_module", load)
    monkeypatch.setattr(build_mod, "core_plan", lambda slots: _Programs())
    return seen


class _Programs:
    """core_plan's answer: each program name stands for itself, its cookie 0."""

    class _Any(dict[str, tuple[str, int]]):
        def __missing__(self, key: str) -> tuple[str, int]:
            return (key, 0)

    def __init__(self) -> None:
        self.programs = self._Any()


def _builder(state: EngineState, attacher: FakeAttacher) -> Builder:
    return Builder(
        state,
        Scope(state, None, None, None, None),
        attacher,  # type: ignore[arg-type]
        command_path=None,
        max_attach=100,
        entry_policy=None,
        multi_links=False,
        account=None,
        confine=None,
        oncpu=None,
        pinned=None,
    )


@pytest.fixture
def state() -> Iterator[EngineState]:
    s = EngineState()
    yield s
    s.closed = True
    s.queue.put(None)


def _build(state: EngineState, text: str) -> ProbeGroup:
    group = state.new_group(parse_spec(text))
    state.queue.put(group)
    assert group.done.wait(WAIT_S)
    return group


def test_a_spec_built_holds_its_rows_and_module(
    state: EngineState, kind: FakeKind, loads: Loads
) -> None:
    attacher = FakeAttacher()
    _builder(state, attacher)
    group = _build(state, "uprobe:python3:f*")
    assert group.state == "attached" and group.error == ""
    assert [r.name for r in group.rows] == ["alpha", "beta"] and attacher.rows == ["alpha", "beta"]
    assert len(state.modules) == 1 and not loads.made[0].cleaned
    assert set(state.rows) == {r.id for r in group.rows} and all(
        r.group == group.id for r in group.rows
    )
    assert kind.loaded_calls == ["uprobe:python3:f*"]
    assert {"plan_s", "compile_s", "attach_s"} <= set(group.timings)


def test_each_failing_step_is_one_line_and_leaves_nothing_loaded(
    state: EngineState, kind: FakeKind, loads: Loads
) -> None:
    attacher = FakeAttacher(fail_on="beta")
    _builder(state, attacher)
    # Attaching the second row fails: the module is let go, no row is kept.
    group = _build(state, "uprobe:python3:a*")
    assert group.state == "error" and "Device or resource busy" in group.error
    assert "\n" not in group.error and loads.made[-1].cleaned
    assert state.modules == [] and state.rows == {}
    # Loading fails (the verifier, a missing map): said with the spec, nothing made.
    attacher.fail_on = None
    loads.fail = OSError("bpf_prog_load: Permission denied\nverifier log: ...")
    group = _build(state, "uprobe:python3:b*")
    assert group.error == "loading probes for uprobe:python3:b* failed: verifier log: ..."
    assert state.modules == []
    # Planning raises what bcc raises (a plain Exception): its last line, the thread alive.
    loads.fail = None
    kind.fail_plan = Exception("Traceback-like first line\nfailed to resolve symbol")
    group = _build(state, "uprobe:python3:c*")
    assert group.state == "error" and group.error == "failed to resolve symbol"
    # A row whose bytes are not in the file's loaded code is refused before loading.
    kind.fail_plan, kind.offset = None, None
    made = len(loads.made)
    group = _build(state, "uprobe:python3:d*")
    assert "is not in the file's loaded code" in group.error and len(loads.made) == made
    # And the thread builds the next spec as if nothing happened.
    kind.offset = 0x1000
    assert _build(state, "uprobe:python3:e*").state == "attached"
    assert len(state.warnings) == 4  # each failure the status line's latest word


def test_a_spec_queued_behind_a_close_is_never_built(
    state: EngineState, kind: FakeKind, loads: Loads
) -> None:
    builder = _builder(state, FakeAttacher())
    state.closed = True
    group = _build(state, "uprobe:python3:f*")
    assert group.state == "error" and group.error.endswith("not attached: closed")
    assert loads.made == []
    # Queued work that is not a spec (a detach) runs, and a failure in it is contained.
    ran: list[int] = []
    state.queue.put(lambda: ran.append(1))
    state.queue.put(lambda: 1 / 0)
    state.queue.put(lambda: ran.append(2))
    state.queue.put(None)
    builder.join()
    assert ran == [1, 2] and not builder._thread.is_alive()
