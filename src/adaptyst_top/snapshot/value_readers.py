"""The checked readers of a snapshot field's JSON value, one per kind of annotation
(codec.py picks them from each part's declaration): each returns the value as the
part holds it or raises Bad, which says what the value is not."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from adaptyst_top.snapshot.inert import inert

Reader = Callable[[Any], Any]


class Bad(Exception):
    """A value that is not what its field declares; `path` grows as it unwinds."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.path: list[str] = []


def checked(read: Reader, check: tuple[Callable[[Any], bool], str] | None) -> Reader:
    if check is None:
        return read
    test, what = check

    def read_checked(v: Any) -> Any:
        value = read(v)
        if not test(value):
            raise Bad(f"not {what}")
        return value

    return read_checked


def read_text(v: Any) -> str:
    if type(v) is str:
        return inert(v)  # from a recording, an agent or a remote: shown, never acted on
    raise Bad("not a string")


def read_choice(choices: tuple[Any, ...]) -> Reader:
    """A Literal's value: one of its words, nothing else (a newer word is refused)."""
    allowed = frozenset(choices)
    said = " | ".join(map(str, choices))

    def read(v: Any) -> Any:
        if type(v) is str and v in allowed:
            return v
        raise Bad(f"not one of {said}")

    return read


def read_int(v: Any) -> int:
    if type(v) is int:
        return v
    if type(v) is float and v - v == 0 and v.is_integer():
        return int(v)
    raise Bad("not an integer")


_FLOAT_MAX = int(sys.float_info.max)


def read_number(v: Any) -> float:
    # A float is finite when v - v is 0 (inf - inf and nan - nan are nan); an int stays
    # an int, so the JSON written again is byte-equal; bool is not a number here.
    if type(v) is float:
        if v - v == 0.0:
            return v  # type: ignore[no-any-return]
        raise Bad("not a finite number")
    if type(v) is int:
        if -_FLOAT_MAX <= v <= _FLOAT_MAX:  # a 4,000-digit integer is no float
            return v  # type: ignore[no-any-return]
        raise Bad("a number past any float")
    raise Bad("not a finite number")


def read_flag(v: Any) -> bool:
    return v is True  # a flag is written only when set


def read_key(v: Any) -> int | str:
    if type(v) is int:
        return v
    if type(v) is str:
        return inert(v)
    raise Bad("not a string or an integer")


def read_ints(n: int) -> Reader:
    slow = read_fixed(n, read_int, "integers")

    def read(v: Any) -> tuple[int, ...]:
        if type(v) is list and len(v) == n and all(type(x) is int for x in v):
            return tuple(v)
        return slow(v)  # type: ignore[no-any-return]

    return read


def read_int_rows(n: int) -> Reader:
    slow = read_list(read_ints(n))

    def read(v: Any) -> tuple[tuple[int, ...], ...]:
        # The common case checked in two passes without a call per row (the hot path of
        # every histogram read back); anything else the row-by-row path reads or refuses.
        if (
            type(v) is list
            and all(type(x) is list and len(x) == n for x in v)
            and all(type(y) is int for x in v for y in x)
        ):
            return tuple(map(tuple, v))
        return slow(v)  # type: ignore[no-any-return]

    return read


def read_fixed(n: int, item: Reader, what: str) -> Reader:
    def read(v: Any) -> tuple[Any, ...]:
        if type(v) is list and len(v) == n:
            try:
                return tuple(item(x) for x in v)
            except Bad:
                pass
        raise Bad(f"not a list of {n} {what}")

    return read


def read_list(item: Reader) -> Reader:
    def read(v: Any) -> tuple[Any, ...]:
        if type(v) is not list:
            raise Bad("not a list")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(item(x))
            except Bad as e:
                e.path.append(f"[{i}]")
                raise
        return tuple(out)

    return read


_reuse = threading.local()


@contextlib.contextmanager
def reusing() -> Iterator[None]:
    """Within it, on this thread, a list of parts read or written is compared item by item
    with the one read (written) last at the same place, and an equal item's part (JSON)
    is taken again instead of read (written): most rows of a wide glob sit idle, unchanged
    every second. Only for a caller that hands over fresh JSON and keeps none of what
    it gets (the agent's wire): what is taken again is shared, not copied."""
    was = getattr(_reuse, "on", False)
    _reuse.on = True
    try:
        yield
    finally:
        _reuse.on = was


def reuse_on() -> bool:
    return getattr(_reuse, "on", False)  # type: ignore[no-any-return]


def same_json(a: Any, b: Any) -> bool:
    """For two values already ==: whether every value in them is of the same type too
    (== takes true for 1, which a fresh read refuses for a number)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        # A row's flat values at C speed, in one order (a different one is read again);
        # only what nests is walked.
        va, vb = list(a.values()), list(b.values())
        types = list(map(type, va))
        if types != list(map(type, vb)) or list(a) != list(b):
            return False
        if dict not in types and list not in types:
            return True
        pairs = zip(va, vb, types, strict=True)
        return all(same_json(v, w) for v, w, t in pairs if t is dict or t is list)
    if type(a) is list:
        return all(same_json(v, w) for v, w in zip(a, b, strict=True))
    return True


def read_parts(item: Reader) -> Reader:
    """A list of snapshot parts (see reusing())."""
    plain = read_list(item)
    mine = threading.local()  # the agent reads and writes each client on its own thread

    def read(v: Any) -> tuple[Any, ...]:
        if not reuse_on() or type(v) is not list:
            return plain(v)  # type: ignore[no-any-return]
        prev: list[tuple[Any, Any]] = getattr(mine, "last", [])
        n = len(prev)
        out, seen = [], []
        for i, x in enumerate(v):
            was = prev[i][0] if i < n else None
            # The same object again may have been changed since: read it again.
            if was is not None and was is not x and was == x and same_json(was, x):
                part = prev[i][1]
            else:
                try:
                    part = item(x)
                except Bad as e:
                    e.path.append(f"[{i}]")
                    raise
            out.append(part)
            seen.append((x, part))
        mine.last = seen
        return tuple(out)

    return read


def read_mapping(value: Reader) -> Reader:
    def read(v: Any) -> dict[str, Any]:
        if type(v) is not dict:
            raise Bad("not a JSON object")
        out = {}
        for k, x in v.items():
            try:
                out[inert(k)] = value(x)
            except Bad as e:
                e.path.append(k)
                raise
        return out

    return read
