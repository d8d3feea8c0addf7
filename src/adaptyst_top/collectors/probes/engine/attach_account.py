"""Attach points, modules and keyed probes of several engines of one owner, bounded
together: the agent keeps one account per user across all their sessions, so what one
session holds is what it attached, and a second session has the rest."""

from __future__ import annotations

import threading
import weakref
from typing import Protocol


class Holder(Protocol):
    @property
    def closed(self) -> bool: ...

    def points_held(self) -> int: ...

    def groups_held(self) -> tuple[int, int]: ...  # (modules, keyed ones among them)


class AttachAccount:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        # Held from an engine's look at the room to its rows being counted (planned), so
        # two sessions planning at once cannot both take the same room.
        self.planning = threading.Lock()
        self._engines: weakref.WeakSet[Holder] = weakref.WeakSet()

    def join(self, engine: Holder) -> None:
        self._engines.add(engine)

    def _live(self) -> list[Holder]:
        return [e for e in list(self._engines) if not e.closed]

    def room(self) -> int:
        """Attach points the owner may still add, over every engine of theirs."""
        return self.limit - sum(e.points_held() for e in self._live())

    def groups(self) -> tuple[int, int]:
        """(modules, keyed modules) the owner's engines hold or are building."""
        held = [e.groups_held() for e in self._live()]
        return sum(m for m, _ in held), sum(k for _, k in held)
