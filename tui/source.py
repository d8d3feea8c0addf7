"""Where the monitor's snapshots come from: a live session, or a recording replayed."""

from __future__ import annotations

import json
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
            parse_spec(spec)
        except ProbeSpecError as exc:
            raise ProbeError(exc.one_line) from None
        self.session.ensure_engine().add(spec)

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
    """Snapshots read one at a time from a `record` file: memory stays flat however long."""

    read_only = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: IO[str] = open(self.path)  # noqa: SIM115 - closed by close()
        self._lines: Iterator[str] = iter(self._file)
        self.ended = False
        self.count = 0
        self.host = "replay"
        self.target = f"replay of {self.path.name}"

    def snapshot(self) -> dict[str, Any] | None:
        for line in self._lines:
            line = line.strip()
            if not line:
                continue
            try:
                snap: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of a recording cut short
            self.count += 1
            self.host = str(snap.get("host", self.host))
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


def check_recording(path: str) -> None:
    """One line when the file cannot be replayed."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{path}: no such file")
    with open(p) as f:
        first = f.readline().strip()
    try:
        snap = json.loads(first) if first else None
    except json.JSONDecodeError:
        snap = None
    if not isinstance(snap, dict) or "t" not in snap:
        raise ValueError(
            f"{path}: not an adaptyst-top recording (expected JSON lines from `record`)"
        )
