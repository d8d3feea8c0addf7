"""Where the monitor's snapshots come from: a live session, or a recording replayed.

Both are a `Source`: what a front end may ask, each action answering in one line
(`ActionError`) when it cannot be done."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Protocol

from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine, ProbeError
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.spec import ProbeSpecError
from adaptyst_top.runtime import listing
from adaptyst_top.runtime.folded import folded, folded_lines
from adaptyst_top.runtime.listing import Candidate
from adaptyst_top.runtime.python_control import PythonControlError
from adaptyst_top.runtime.python_listing import python_candidates
from adaptyst_top.runtime.record_file import LINE_MAX, open_recording, recording_lines
from adaptyst_top.runtime.record_format import CompactDecoder
from adaptyst_top.runtime.remote.client import AgentInterrupted, AgentRefused
from adaptyst_top.runtime.session import Session, SessionError
from adaptyst_top.runtime.zstd_frames import damage_line, damage_of, stopped_line
from adaptyst_top.snapshot import SCHEMA_VERSION, ProbeRef, Snapshot, SnapshotError
from adaptyst_top.system.targets import TargetError, mapped_files


class ActionError(RuntimeError):
    """Why an action on a source was not done, in one line for the status bar."""


class ReadOnly(ActionError):
    """Asked a replay to change what it shows."""


class Source(Protocol):
    """What the monitor shows and what its keys ask of it."""

    read_only: bool
    host: str
    want_hist: bool  # set while a view shows a histogram: snapshots then carry them

    @property
    def target(self) -> str: ...  # what is monitored, for the header

    def snapshot(self) -> Snapshot | None: ...  # None: nothing more (a replay's end)
    def toggle(self, ref: ProbeRef) -> bool: ...  # whether the row is now on
    def add(self, spec: str) -> None: ...  # queued; compiles in the background
    def remove(self, ref: ProbeRef) -> str: ...  # the removed spec's text
    def candidates(self) -> Iterable[Candidate]: ...  # what the picker offers, as read
    def apply_advice(self, task: str) -> None: ...
    def set_advisor_mode(self, mode: str) -> None: ...
    def stop(self) -> None: ...  # the monitor quits: a wait for data under way ends now
    @property
    def untargeted(self) -> bool: ...  # nothing to watch yet: the process list first
    def profile(self, pid: int) -> None: ...  # sample PID's stacks from now on


class LiveSource:
    read_only = False

    def __init__(self, session: Session) -> None:
        self.session = session
        self.host = socket.gethostname()
        self.want_hist = False

    @property
    def target(self) -> str:
        s = self.session
        if s.options.target.job is not None:
            return f"job {s.options.target.job}"
        if s.child is not None:
            return f"pid {s.pid} ({os.path.basename(s.child.argv[0])})"
        return f"pid {s.pid}" if s.pid else "node-wide"

    def snapshot(self) -> Snapshot:
        return self.session.snapshot(with_hist=self.want_hist)

    def _engine(self) -> ProbeEngine:
        if self.session.engine is None:
            raise ActionError("no probe engine: start with --probe, or as root add one with `a`")
        return self.session.engine

    def toggle(self, ref: ProbeRef) -> bool:
        try:
            if self.session.remote is not None:
                return self.session.remote.toggle(ref)
            return self._engine().toggle(ref)
        except (ProbeError, AgentRefused, AgentInterrupted, OSError) as exc:
            raise ActionError(str(exc)) from None

    def add(self, spec: str) -> None:
        try:
            parsed = parse_spec(spec)
        except ProbeSpecError as exc:
            raise ActionError(exc.one_line) from None
        if self._ended():  # `u` on a short command's function came after it (issue 74)
            raise ActionError(
                f"the process has ended; on the next run, --probe '{spec}' times it from its start"
            )
        control = self.session.python_control if parsed.kind == "python" else None
        try:
            if control is not None:  # the command's hook times it from now on
                control.add(parsed)
            if self.session.remote is not None:
                self.session.remote.add(spec)
            else:
                self.session.ensure_engine().add(parsed)  # parsed once
        except (ProbeError, AgentRefused, AgentInterrupted, OSError, PythonControlError) as exc:
            if control is not None and not isinstance(exc, PythonControlError):
                with contextlib.suppress(PythonControlError):
                    control.remove(parsed)
            raise ActionError(str(exc)) from None

    def _ended(self) -> bool:
        """Whether the session's one process has ended (a job or the node: never)."""
        child, pid = self.session.child, self.session.pid
        if child is not None:
            return child.poll() is not None
        if pid is None or self.session.options.target.job is not None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # another user's, through the agent: it is there
        return False

    def remove(self, ref: ProbeRef) -> str:
        try:
            if self.session.remote is not None:
                removed = self.session.remote.remove(ref)
            else:
                removed = self._engine().remove(ref)
        except (ProbeError, AgentRefused, AgentInterrupted, OSError) as exc:
            raise ActionError(str(exc)) from None
        control = self.session.python_control
        if control is not None and removed.startswith("python:"):
            # Its functions are no longer timed (another spec may still name them).
            with contextlib.suppress(ProbeSpecError, PythonControlError):
                control.remove(parse_spec(removed))
        return removed

    def apply_advice(self, task: str) -> None:
        if self.session.placement is None:
            raise ActionError("the advisor is not running (start with --advisor or `demo`)")
        try:
            sent = self.session.placement.apply(task)
        except LookupError as exc:
            raise ActionError(str(exc.args[0])) from None
        if sent == 0:
            raise ActionError(f"advice for {task} applied, but no application is connected")

    def set_advisor_mode(self, mode: str) -> None:
        if self.session.placement is not None:
            self.session.placement.set_mode(mode)

    def stop(self) -> None:
        self.session.options.cancel.set()

    @property
    def untargeted(self) -> bool:
        s = self.session
        return s.pid is None and s.options.target.job is None and not s.options.probing.specs

    def profile(self, pid: int) -> None:
        try:
            self.session.start_profile(pid)
        except (
            ProbeError,
            SessionError,
            TargetError,
            AgentRefused,
            AgentInterrupted,
            OSError,
        ) as exc:
            raise ActionError(str(exc)) from None

    def candidates(self) -> Iterable[Candidate]:
        """What the picker offers: the functions of the target's executable, then of every
        library it maps, and every USDT probe in them, the refused ones marked; as each
        is read (the agent's come in one answer)."""
        s = self.session
        # A Python process's own functions first (read here, as the user: never by root's;
        # a process on another node is not this one's to read).
        python = python_candidates(s.pid) if s.pid and s.options.host is None else []
        if s.remote is not None:
            try:
                return python + s.remote.candidates()
            except (AgentRefused, AgentInterrupted, OSError, ValueError):
                return python
        files: list[str] = []
        if s.pid:
            try:
                files = mapped_files(s.pid)
            except TargetError:
                files = []
        if s.child is not None and s.child.path not in files:
            files.insert(0, s.child.path)
        return itertools.chain(
            python, listing.iter_candidates(files, s.pid or None, listing.entry_policy())
        )


class ReplaySource:
    """Snapshots read one at a time from a `record` file: memory stays flat however long.
    A line that is not a well-formed snapshot (not UTF-8, not JSON, another shape) is
    skipped and counted; the status line says how many."""

    read_only = True
    want_hist = True  # recorded with them or not: nothing to ask for

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: IO[bytes] = open_recording(self.path)
        self._lines: Iterator[bytes | None] = recording_lines(self._file)
        self.ended = False
        self.count = 0
        self.skipped = 0
        self._told = 0
        self._damage_told = 0
        self._stop_told = False
        self._newer_told = False
        self.host = "replay"
        self.target = f"replay of {self.path.name}"
        self._decoder = CompactDecoder()

    def snapshot(self) -> Snapshot | None:
        for raw in self._lines:
            if raw is not None and not raw.strip():
                continue
            snap = None if raw is None else parse_snapshot_line(raw, self._decoder)
            if snap is None:
                self.skipped += 1  # a torn last line of a recording cut short, or garbage
                continue
            self.count += 1
            self.host = snap.host or self.host
            notes = []
            if len(damage := damage_of(self._file)) != self._damage_told:
                self._damage_told = len(damage)
                notes.append(damage_line(damage, self.path.name))
            if not self._stop_told and (stopped := stopped_line(self._file, self.path.name)):
                self._stop_told = True
                notes.append(stopped)
            if self.skipped != self._told:
                self._told = self.skipped
                notes.append(f"skipped {self.skipped} malformed line(s) of {self.path.name}")
            if snap.schema_version > SCHEMA_VERSION and not self._newer_told:
                self._newer_told = True
                notes.append(
                    f"{self.path.name} is of a newer format (schema {snap.schema_version}): "
                    "only the fields this version knows are shown"
                )
            return replace(snap, warnings=snap.warnings + tuple(notes)) if notes else snap
        self.ended = True
        return None

    def toggle(self, ref: ProbeRef) -> bool:
        raise ReadOnly("a replay is read-only")

    def add(self, spec: str) -> None:
        raise ReadOnly("a replay is read-only")

    untargeted = False

    def profile(self, pid: int) -> None:
        raise ReadOnly("a replay is read-only")

    def remove(self, ref: ProbeRef) -> str:
        raise ReadOnly("a replay is read-only")

    def apply_advice(self, task: str) -> None:
        raise ReadOnly("a replay is read-only: advice is not applied")

    def set_advisor_mode(self, mode: str) -> None:
        pass  # the recorded advisor's mode stays what it was; nothing to tell

    def candidates(self) -> list[Candidate]:
        return []

    def stop(self) -> None:
        pass  # a file is read at once

    def close(self) -> None:
        self._file.close()


# Bytes of Python objects one line may cost to parse. JSON's worst case is about 24x
# its text (`[],` is 3 bytes, a list 72), and a control character read back is escaped
# into a piece of its own (inert.py: ~100 bytes each; 24 MB of U+0085 took 1 GB). A line
# is priced before json.loads sees it: a crafted one is refused as malformed, and
# `export` of any recording stays in bounds.
PARSE_BUDGET = 96 << 20
_PRICED_FROM = 64 << 10  # smaller lines cost at most a few MiB: not worth pricing
_PLAIN = bytes(range(0x20, 0x7F))  # what JSON text and inert() leave as it is


def parse_cost(raw: bytes) -> int:
    """An upper estimate of what parsing RAW as JSON holds at once, in bytes: the text
    twice (bytes, then str), each container and value as CPython makes them, and each
    byte that is not plain ASCII as the piece inert() would make of it."""
    containers = raw.count(b"[") + raw.count(b"{")
    values = raw.count(b",") + raw.count(b":")
    odd = len(raw.translate(None, _PLAIN))
    return 2 * len(raw) + 72 * containers + 40 * values + 128 * odd


def parse_snapshot_line(raw: bytes, decoder: CompactDecoder | None = None) -> Snapshot | None:
    """A recorded snapshot, or None when the line is not one (not UTF-8, not JSON, or
    not of the snapshot's shape: Snapshot.from_json says what it checks; or priced past
    PARSE_BUDGET). A compact line (record_format) needs the decoder that read the lines
    before it."""
    if len(raw) > _PRICED_FROM and parse_cost(raw) > PARSE_BUDGET:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
        if decoder is not None and isinstance(value, dict):
            value = decoder.decode(value)  # CompactError is a ValueError
        return Snapshot.from_json(value)
    except (UnicodeDecodeError, ValueError, RecursionError, SnapshotError):
        return None


class Recording:
    """The snapshots of a recording (full or compact, plain or .zst), in order; once read,
    `skipped` counts its malformed lines and `damage` says what damage to a compressed
    recording cost, if any."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.skipped = 0
        self.damage: str | None = None

    def __iter__(self) -> Iterator[Snapshot]:
        decoder = CompactDecoder()
        with open_recording(Path(self.path)) as f:
            for raw in recording_lines(f):
                if raw is not None and not raw.strip():
                    continue
                snap = None if raw is None else parse_snapshot_line(raw, decoder)
                if snap is None:
                    self.skipped += 1
                    continue
                yield snap
            damage = damage_of(f)
            said = [damage_line(damage, self.path)] if damage else []
            if stopped := stopped_line(f, self.path):
                said.append(stopped)
        self.damage = "; ".join(said) or None


def export_recording(path: str, out: IO[str]) -> tuple[int, int, str | None]:
    """Every snapshot of a recording as a full JSON line, as `record --format full`
    writes it; (lines written, lines skipped, what damage cost, if any)."""
    recording = Recording(path)
    written = 0
    for snap in recording:
        out.write(json.dumps(snap.to_json()) + "\n")
        written += 1
    return written, recording.skipped, recording.damage


def export_folded(path: str, out: IO[str], off: bool) -> tuple[int, int, str | None]:
    """The recording's profile as folded stacks (runtime/folded.py); (snapshots read,
    lines skipped, damage). A recording without a profile is one line's error."""
    recording = Recording(path)
    read = 0
    profiled = False
    counts: Counter[str] = Counter()
    for snap in recording:
        read += 1
        profiled = profiled or snap.profile is not None
        counts.update(folded([snap], off))
    if read and not profiled:
        raise ValueError("no profile in it (record --profile makes one)")
    for line in folded_lines(counts):
        out.write(line + "\n")
    return read, recording.skipped, recording.damage


def check_recording(path: str) -> None:
    """One line when the file cannot be replayed."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if p.is_dir():
        raise ValueError(f"{path}: a directory, not a recording")
    with open_recording(p) as f:
        first = f.readline(LINE_MAX + 1)  # never read past: a 1 TB file of zeros is one line
    if len(first) > LINE_MAX or parse_snapshot_line(first) is None:
        raise ValueError(
            f"{path}: not an adaptyst-top recording (expected JSON lines from `record`)"
        )
