"""The snapshot's JSON, derived from each part's dataclass declaration: one codec.

Each field is written under its name (or `json_field(name=...)` where Python cannot use
the contract's: "class", "from"), in declaration order, and read back checked against
its annotation: a float is finite, an integer whole, a string made inert, a list a list.
What a field leaves out (`omit`), where its figures sit (`flatten`: in the parent
object) and what a missing key reads as (`missing`, `missing_from`, `required`) are
options of the field; nothing else about the JSON is written by hand.

A missing key or a null reads as the field's default, else its type's zero ("", 0, (),
{}): old recordings lack fields that were added later.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from adaptyst_top.snapshot.inert import has_unsafe, inert
from adaptyst_top.snapshot.value_readers import (
    Bad,
    Reader,
    checked,
    read_choice,
    read_fixed,
    read_flag,
    read_int,
    read_int_rows,
    read_ints,
    read_key,
    read_list,
    read_mapping,
    read_number,
    read_parts,
    read_text,
    reuse_on,
)

T = TypeVar("T")
Omit = Literal["none", "empty"]  # leave the key out when the value is None / falsy
_OPTIONS = "adaptyst_top.json"
_UNSET: Any = object()
Writer = Callable[[Any], Any] | None  # None: written as it is


def json_field(
    *,
    name: str | None = None,
    omit: Omit | None = None,
    flatten: bool = False,
    missing: Any = _UNSET,
    missing_from: str | None = None,
    required: bool = False,
    check: tuple[Callable[[Any], bool], str] | None = None,
) -> dict[str, Any]:
    """A field's JSON options, for `dataclasses.field(metadata=...)`; `check`: a test
    of the value read and what the value is not when it fails it."""
    return {_OPTIONS: (name, omit, flatten, missing, missing_from, required, check)}


class SnapshotError(ValueError):
    """A JSON value that is not a snapshot; the message says which part, in one line."""


def inert_values(value: Any) -> Any:
    """VALUE with every string in it, keys too, inert (a device's extra, a prediction)."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {inert(str(k)): inert_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [inert_values(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    attr: str
    key: str
    plain: type | None  # the type its values mostly have, taken as they are (str, float, int)
    read: Reader
    write: Writer
    omit: Omit | None
    flatten: type | None  # the part whose fields sit in this object
    missing: Any  # what an absent key or null reads as (_UNSET: required)
    missing_from: str | None  # an absent key reads as this (earlier) field's value


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    # Reading: (attr, key, plain, read, flatten, missing, missing_from) of each field.
    rows: tuple[tuple[str, str, type | None, Reader, type | None, Any, str | None], ...]
    # Writing: runs of plain fields fetched by one attrgetter, or one field alone.
    steps: tuple[tuple[tuple[str, ...], Callable[[Any], Any]] | _Field, ...]


_PLANS: dict[type, _Plan] = {}


def encode(part: Any) -> dict[str, Any]:
    """PART (a snapshot or any of its parts) as the JSON object of its declaration."""
    out: dict[str, Any] = {}
    for step in _plan(type(part)).steps:
        if type(step) is tuple:
            keys, get = step
            values = get(part)
            if len(keys) == 1:
                out[keys[0]] = values
            else:
                out.update(zip(keys, values, strict=True))
            continue
        f: _Field = step  # type: ignore[assignment]
        v = getattr(part, f.attr)
        if f.omit is not None and (v is None if f.omit == "none" else not v):
            continue
        if f.flatten is not None:
            out.update(encode(v))
        else:
            out[f.key] = v if f.write is None else f.write(v)
    return out


def decode(cls: type[T], value: Any) -> T:
    """VALUE read back as a CLS, checked; SnapshotError (one line, saying where) if not."""
    try:
        return _read_part(cls, value)  # type: ignore[no-any-return]
    except Bad as e:
        where = ".".join(reversed(e.path)).replace(".[", "[")
        raise SnapshotError(f"{cls.__name__}{': ' if where else ''}{where} is {e.what}") from None


def _read_part(cls: type, value: Any) -> Any:
    if not isinstance(value, dict):
        raise Bad("not a JSON object")
    get = value.get
    args: dict[str, Any] = {}
    texts: list[str] = []
    for attr, key, plain, read, flatten, missing, missing_from in _plan(cls).rows:
        if flatten is not None:
            args[attr] = _read_part(flatten, value)
            continue
        v: Any = get(key)
        # The hot path of every row read back: a value of its plain type, no call.
        t = type(v)
        if t is plain:
            if t is str:
                texts.append(v)
                args[attr] = v
                continue
            if t is int or v - v == 0.0:  # a float is finite when v - v is 0
                args[attr] = v
                continue
        if v is None:
            if missing_from is not None:
                args[attr] = args[missing_from]
            elif missing is _UNSET:
                e = Bad("missing")
                e.path.append(key)
                raise e
            else:
                args[attr] = missing
            continue
        try:
            args[attr] = read(v)
        except Bad as e:
            e.path.append(key)
            raise
    if texts and has_unsafe("".join(texts)):
        return _read_part_inert(cls, value)
    return cls(**args)


def _read_part_inert(cls: type, value: Any) -> Any:
    """A part with control characters in its text: every text field read again, inert."""
    return _read_part(cls, {k: inert(v) if type(v) is str else v for k, v in value.items()})


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


def _make_plan(cls: type) -> _Plan:
    hints = typing.get_type_hints(cls)
    fields = []
    for d in dataclasses.fields(cls):
        name, omit, flatten, missing, missing_from, required, check = d.metadata.get(
            _OPTIONS, (None, None, False, _UNSET, None, False, None)
        )
        kind = hints[d.name]
        if required:
            missing = _UNSET
        elif missing is _UNSET:
            missing = _default(d, kind)
        fields.append(
            _Field(
                d.name,
                name or d.name,
                None if check else _plain(kind),
                checked(_reader(kind), check),
                _writer(kind),
                omit,
                kind if flatten else None,
                missing,
                missing_from,
            )
        )
    steps: list[Any] = []
    run: list[_Field] = []
    for f in [*fields, None]:
        if f is not None and f.omit is None and f.flatten is None and f.write is None:
            run.append(f)
            continue
        if run:
            steps.append((tuple(r.key for r in run), operator.attrgetter(*(r.attr for r in run))))
            run = []
        if f is not None:
            steps.append(f)
    rows = tuple(
        (f.attr, f.key, f.plain, f.read, f.flatten, f.missing, f.missing_from) for f in fields
    )
    return _Plan(rows, tuple(steps))


def _default(d: dataclasses.Field[Any], kind: Any) -> Any:
    if d.default is not dataclasses.MISSING:
        return d.default
    if d.default_factory is not dataclasses.MISSING:
        return d.default_factory()
    if type(None) in typing.get_args(kind):
        return None
    base, args = _parts(kind)
    if base is tuple and args and args[-1] is not Ellipsis:
        return tuple(_default_of(a) for a in args)
    return _default_of(kind)


def _default_of(kind: Any) -> Any:
    """The zero of a type: what an old recording's absent field reads as."""
    base, _ = _parts(kind)
    zeros: dict[Any, Any] = {str: "", int: 0, float: 0.0, bool: False, tuple: ()}
    if base in zeros:
        return zeros[base]
    if base in (dict, Mapping):
        return {}
    if base is Literal:
        return ""
    return None


def _parts(kind: Any) -> tuple[Any, tuple[Any, ...]]:
    """(origin, arguments) of an annotation, with `X | None` read as X."""
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) == 1:
            return _parts(rest[0])
        return typing.Union, rest
    if origin is None:
        return kind, ()
    return origin, args


def _plain(kind: Any) -> type | None:
    base, _ = _parts(kind)
    return base if base in (str, float, int) else None


def _writer(kind: Any) -> Writer:
    base, args = _parts(kind)
    if dataclasses.is_dataclass(base):
        return encode
    if base is tuple:
        item = _writer(args[0]) if args and args[-1] is Ellipsis else None
        if item is None:
            return list
        part = _parts(args[0])[0]
        if dataclasses.is_dataclass(part) and part.__dataclass_params__.frozen:  # type: ignore[union-attr]
            return _write_parts(item)  # an equal part is one that cannot have changed since
        return lambda v: [item(x) for x in v]
    if base in (dict, Mapping):
        inner = _writer(args[1]) if args else None
        if inner is None:
            return dict
        return lambda v: {k: inner(x) for k, x in v.items()}
    return None


def _write_parts(item: Callable[[Any], Any]) -> Writer:
    """A list of parts written (see value_readers.reusing())."""
    mine = threading.local()

    def write(v: Any) -> list[Any]:
        if not reuse_on():
            return [item(x) for x in v]
        prev: list[tuple[Any, Any]] = getattr(mine, "last", [])
        n = len(prev)
        out = [prev[i][1] if i < n and prev[i][0] == x else item(x) for i, x in enumerate(v)]
        mine.last = list(zip(v, out, strict=True))
        return out

    return write


def _reader(kind: Any) -> Reader:
    base, args = _parts(kind)
    if dataclasses.is_dataclass(base):
        return lambda v: _read_part(base, v)  # type: ignore[arg-type]
    if base is typing.Union:
        return read_key if set(args) <= {int, str} else inert_values
    if base is tuple:
        if not args:
            return read_list(inert_values)
        if args[-1] is Ellipsis:
            inner, within = _parts(args[0])
            if inner is tuple and within and all(a is int for a in within):
                return read_int_rows(len(within))  # a histogram's [bucket, count] pairs
            if dataclasses.is_dataclass(inner):
                return read_parts(_reader(args[0]))
            return read_list(_reader(args[0]))
        if all(a is int for a in args):
            return read_ints(len(args))
        if all(a is float for a in args):
            return read_fixed(len(args), read_number, "numbers")
        return read_list(inert_values)
    if base in (dict, Mapping):
        return read_mapping(_reader(args[1]) if args else inert_values)
    if base is Literal:
        return read_choice(args)
    simple: dict[Any, Reader] = {
        str: read_text,
        int: read_int,
        float: read_number,
        bool: read_flag,
    }
    return simple.get(base, inert_values)


class JsonPart:
    """A snapshot part whose JSON comes from its declaration (see this module)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_json(cls: type[T], value: Any) -> T:
        return decode(cls, value)
