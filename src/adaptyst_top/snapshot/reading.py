"""Reading a snapshot's JSON back, checked: each field for the type the contract gives
it, every string made inert (it came from a recording, an agent or a remote)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from adaptyst_top.snapshot.inert import inert

T = TypeVar("T")


class SnapshotError(ValueError):
    """A JSON value that is not a snapshot; the message says which part, in one line."""


def optional(read: Callable[[Any], T], value: Any) -> T | None:
    return None if value is None else read(value)


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def whole(v: Any) -> bool:
    return finite(v) and float(v).is_integer()


def inert_values(value: Any) -> Any:
    """VALUE with every string in it inert (a device's extra: GPU process names...)."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {k: inert_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [inert_values(v) for v in value]
    return value


class Fields:
    """One JSON object's fields, each checked for the type the contract gives it."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise SnapshotError(f"{where}: not a JSON object")
        self.d: dict[str, Any] = value
        self.where = where

    def value(self, k: str) -> Any:
        return self.d.get(k)

    def _bad(self, k: str, what: str) -> SnapshotError:
        return SnapshotError(f"{self.where}: {k} is not {what}")

    def number(self, k: str) -> float | None:
        v: Any = self.d.get(k)
        kind = type(v)
        # Exact types first (the hot path of a replay or an agent's snapshot): a float is
        # finite when v - v is 0 (inf - inf and nan - nan are nan); bool is not an int here.
        if kind is float:
            if v - v == 0.0:
                return float(v)
            raise self._bad(k, "a finite number")
        if kind is int or v is None:
            return v  # type: ignore[no-any-return]  # an int stays an int (byte-equal JSON)
        raise self._bad(k, "a finite number")

    def integer(self, k: str) -> int | None:
        v = self.d.get(k)
        if v is None:
            return None
        if not whole(v):
            raise self._bad(k, "an integer")
        return int(v)

    def text(self, k: str, default: str = "") -> str:
        v = self.d.get(k)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self._bad(k, "a string")
        return inert(v)  # from a recording, an agent or a remote: shown, never acted on

    def opt_text(self, k: str) -> str | None:
        return None if self.d.get(k) is None else self.text(k)

    def items(self, k: str) -> list[Any]:
        v = self.d.get(k)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._bad(k, "a list")
        return v

    def mapping(self, k: str) -> dict[str, Any]:
        v = self.d.get(k)
        if v is None:
            return {}
        if not isinstance(v, dict) or not all(isinstance(x, dict) for x in v.values()):
            raise self._bad(k, "an object of objects")
        return v
