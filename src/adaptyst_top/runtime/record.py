"""Headless recording: one snapshot per interval as a JSON line, until the command
exits, a signal, the duration, or the target's end."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from typing import IO

from adaptyst_top.runtime.record_format import CompactEncoder
from adaptyst_top.runtime.remote.defaults import STOPPING_S
from adaptyst_top.runtime.session import Session
from adaptyst_top.runtime.stop_flag import StopFlag


class WriteInterrupted(Exception):
    """A signal came while a line waited on a reader that does not read (a full pipe):
    raised from the signal handler, it gets the recording out of that write."""


def gap_line(seconds: float, missed: int) -> str:
    """What a line says after a wait that took MISSED intervals' lines."""
    return (
        f"no snapshot for {seconds:.1f} s: {missed} interval(s) not recorded (the snapshot, "
        "or the write of the line before, came late)"
    )


def record_snapshots(
    session: Session,
    out: IO[str],
    interval: float,
    duration: float | None,
    stop: StopFlag,
    compact: bool = False,
    writing: threading.Event | None = None,
) -> int:
    """Snapshots until the command exits, a signal, the duration, or the target's end;
    the status: the command's (ended by us or not), else 0. compact: each line says what
    changed since the one before (runtime/record_format.py)."""
    encoder = CompactEncoder() if compact else None
    child = session.child
    start = time.monotonic()
    end = None if duration is None else start + duration
    if end is not None:  # whatever an agent does, the last line is written on time
        session.give_up_waits_at(end + STOPPING_S)
    next_tick = start
    while True:
        next_tick += interval
        # The duration ends the run on time whatever the interval: a last, shorter tick.
        tick_end = next_tick if end is None else min(next_tick, end)
        while not stop.is_set() and time.monotonic() < tick_end:
            if child is not None and child.poll() is not None:
                break
            stop.wait(min(0.05, max(0.0, tick_end - time.monotonic())))
        exited = child is not None and child.poll() is not None
        timed_out = end is not None and time.monotonic() >= end
        snap = session.snapshot()
        late = time.monotonic() - tick_end
        if late >= interval:
            # The snapshot came past the next tick (an agent that stalled): the ticks it
            # covered are one stated gap, not a burst of lines a millisecond apart.
            missed = int(late // interval)
            next_tick += missed * interval
            snap = replace(snap, warnings=(*snap.warnings, gap_line(late + interval, missed)))
        ended: int | None = None
        if exited or timed_out or stop.is_set():
            snap = replace(snap, final=True)
        if not exited and (timed_out or stop.is_set()):
            # Ended now, before the last line: it says what the command ended with (a kept
            # command runs on, and its status stays null).
            ended = session.end_command()
            if snap.command is not None:
                snap = replace(snap, command=replace(snap.command, status=ended))
        if encoder is None:
            line = json.dumps(snap.to_json()) + "\n"
        else:
            line = json.dumps(encoder.encode(snap.to_json()), separators=(",", ":")) + "\n"
        if writing is not None:
            writing.set()  # a stop signal now may find this write blocked
        try:
            out.write(line)
            out.flush()
        finally:
            if writing is not None:
                writing.clear()
        if exited:
            assert child is not None
            return child.status or 0
        if stop.is_set() or timed_out:
            return 0 if ended is None or session.options.target.keep_command else ended
        if snap.target_ended:
            return 0
