"""The result type of every capability check: a state shown to the user, never a traceback."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from adaptyst_top.snapshot.devices import SourceStatus

Status = SourceStatus  # a check's state is a device source's

# Worst first: a capability is as good as its weakest part.
_SEVERITY: dict[str, int] = {"missing": 3, "denied": 2, "degraded": 1, "ok": 0}


@dataclass
class Capability:
    name: str
    status: Status
    detail: str
    fix: str = ""
    parts: list[Capability] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.status in ("ok", "degraded")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.parts:
            del data["parts"]
        return data


def worst(parts: list[Capability]) -> Capability:
    """The part that limits a compound capability (first of the worst)."""
    return max(parts, key=lambda c: _SEVERITY[c.status])
