"""Where the monitor's snapshots come from: a live session, or a recording replayed."""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from adaptyst_top.collectors.elf_info import read_elf
from adaptyst_top.collectors.probe_engine import ProbeError
from adaptyst_top.collectors.probe_spec import ProbeSpecError, parse_spec
from adaptyst_top.collectors.targets import TargetError, mapped_files
from adaptyst_top.tui.session import Session


class ReadOnly(RuntimeError):
    """Asked a replay to change what it shows."""


class LiveSource:
    read_only = False

    def __init__(self, session: Session) -> None:
        self.session = session
        self.host = socket.gethostname()
        self.want_hist = False  # set while a detail view shows a histogram

    @property
    def target(self) -> str:
        s = self.session
        if s.child is not None:
            return f"pid {s.pid} ({os.path.basename(s.child.argv[0])})"
        return f"pid {s.pid}" if s.pid else "node-wide"

    def snapshot(self) -> dict[str, Any] | None:
        snap: dict[str, Any] = self.session.snapshot(with_hist=self.want_hist)
        return snap

    def _engine(self) -> Any:
        if self.session.engine is None:
            raise ProbeError("no probe engine: start with --probe, or as root add one with `a`")
        return self.session.engine

    def toggle(self, row_id: int) -> bool:
        return bool(self._engine().toggle(row_id))

    def add(self, spec: str) -> None:
        """Queue a probe (compiles in the background). Raises with one line."""
        try:
            parsed = parse_spec(spec)
        except ProbeSpecError as exc:
            raise ProbeError(exc.one_line) from None
        self.session.ensure_engine().add(parsed)  # parsed once

    def remove(self, spec: str) -> None:
        engine = self._engine()
        for group in list(engine.groups):
            if group.spec_text == spec:
                engine.remove(group)

    def apply_advice(self, task: str) -> None:
        if self.session.placement is None:
            raise ProbeError("the advisor is not running (start with --advisor or `demo`)")
        sent = self.session.placement.apply(task)
        if sent == 0:
            raise ProbeError(f"advice for {task} applied, but no application is connected")

    def set_advisor_mode(self, mode: str) -> None:
        if self.session.placement is not None:
            self.session.placement.set_mode(mode)

    def candidates(self) -> list[str]:
        """Probe specs the target offers: its executable's functions and every USDT probe."""
        files: list[str] = []
        s = self.session
        if s.pid:
            try:
                files = mapped_files(s.pid)
            except TargetError:
                files = []
        if s.child is not None and s.child.path not in files:
            files.insert(0, s.child.path)
        specs: list[str] = []
        for i, path in enumerate(files):
            try:
                info = read_elf(path)
            except (OSError, ValueError):
                continue
            if i == 0:
                specs += [f"uprobe:{path}:{f.name}" for f in info.functions]
            seen = set()
            for u in info.usdt:
                if (u.provider, u.name) not in seen:
                    seen.add((u.provider, u.name))
                    specs.append(f"usdt:{path}:{u.provider}:{u.name}")
        return specs


class ReplaySource:
    """Snapshots read one at a time from a `record` file: memory stays flat however long.
    A line that is not a well-formed snapshot (not UTF-8, not JSON, another shape) is
    skipped and counted; the status line says how many."""

    read_only = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: IO[bytes] = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        self._lines: Iterator[bytes] = iter(self._file)
        self.ended = False
        self.count = 0
        self.skipped = 0
        self._told = 0
        self.host = "replay"
        self.target = f"replay of {self.path.name}"

    def snapshot(self) -> dict[str, Any] | None:
        for raw in self._lines:
            if not raw.strip():
                continue
            snap = parse_snapshot_line(raw)
            if snap is None:
                self.skipped += 1  # a torn last line of a recording cut short, or garbage
                continue
            self.count += 1
            self.host = str(snap.get("host", self.host))
            if self.skipped != self._told:
                self._told = self.skipped
                note = f"skipped {self.skipped} malformed line(s) of {self.path.name}"
                snap.setdefault("warnings", []).append(note)
            return snap
        self.ended = True
        return None

    def toggle(self, row_id: int) -> bool:
        raise ReadOnly("a replay is read-only")

    def add(self, spec: str) -> None:
        raise ReadOnly("a replay is read-only")

    def remove(self, spec: str) -> None:
        raise ReadOnly("a replay is read-only")

    def candidates(self) -> list[str]:
        return []

    def close(self) -> None:
        self._file.close()


_NUMBER = (int, float)
_LISTS = ("probes", "devices", "tasks", "advice", "warnings")
# What the screens read from each entry, by type; anything else is carried along as is.
_NUMERIC = frozenset(
    [
        "count",
        "rate_hz",
        "mean_ns",
        "p50_ns",
        "p95_ns",
        "p99_ns",
        "min_ns",
        "max_ns",
        "overhead_ns_per_hit",
        "bpf_ns_per_hit",
        "util",
        "mem_used_bytes",
        "mem_total_bytes",
        "power_w",
        "energy_j",
        "temp_c",
        "confidence",
        "time_gain",
        "energy_gain",
    ]
)
_TEXT = frozenset(
    [
        "spec",
        "name",
        "kind",
        "state",
        "target",
        "error",
        "note",
        "task",
        "current",
        "suggested",
        "why",
    ]
)


def _finite(v: Any) -> bool:
    return isinstance(v, _NUMBER) and not isinstance(v, bool) and math.isfinite(v)


def _entry_ok(item: dict[str, Any]) -> bool:
    for k, v in item.items():
        if v is None:
            continue
        if k in _NUMERIC and not _finite(v):
            return False
        if k in _TEXT and not isinstance(v, str):
            return False
        if k == "key" and not isinstance(v, (str, int)):
            return False
        if k == "hist" and not (
            isinstance(v, list)
            and all(isinstance(b, list) and len(b) == 2 and all(_finite(x) for x in b) for b in v)
        ):
            return False
        if k == "raw" and not (
            isinstance(v, dict) and all(x is None or _finite(x) for x in v.values())
        ):
            return False
    return True


def parse_snapshot_line(raw: bytes) -> dict[str, Any] | None:
    """A recorded snapshot, or None when the line is not one: UTF-8 JSON, an object with
    a finite `t`, lists where lists belong, objects in them, finite numbers throughout."""
    try:
        snap = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(snap, dict):
        return None
    t = snap.get("t")
    if not isinstance(t, _NUMBER) or isinstance(t, bool) or not math.isfinite(t):
        return None
    for key in _LISTS:
        items = snap.get(key, [])
        if not isinstance(items, list):
            return None
        if key != "warnings" and not all(isinstance(i, dict) for i in items):
            return None
        if key == "warnings" and not all(isinstance(i, str) for i in items):
            return None
    entries = (i for key in ("probes", "devices", "tasks", "advice") for i in snap.get(key, []))
    if not all(_entry_ok(item) for item in entries):
        return None
    if not isinstance(snap.get("host", ""), str) or not isinstance(snap.get("overhead", {}), dict):
        return None
    return snap


def check_recording(path: str) -> None:
    """One line when the file cannot be replayed."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if p.is_dir():
        raise ValueError(f"{path}: a directory, not a recording")
    with open(p, "rb") as f:
        first = f.readline(1 << 20)
    if parse_snapshot_line(first) is None:
        raise ValueError(
            f"{path}: not an adaptyst-top recording (expected JSON lines from `record`)"
        )
