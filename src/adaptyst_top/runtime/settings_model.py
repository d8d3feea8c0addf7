"""One declaration per setting, for the user's config.toml and the agent's agent.toml.

Each setting is a dataclass field made by `setting()`: its default, its type (the
annotation), its range or choices, the [table] it sits in and one line of help. From
that one declaration come the checking, the errors (file, line, key and reason, in one
line), the handling of an unknown key (a warning with the nearest known key for the
user's file, a refusal for the agent's: an admin's typo must not open a bound) and the
commented file that documents every default (`commented`; docs/config.toml and
systemd/agent.toml are written by it, and a test says they still are).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from adaptyst_top.runtime.limits import check_range, fraction_of_percent

T = TypeVar("T")
_SETTING = "adaptyst_top.setting"


class SettingsError(ValueError):
    """A settings file that is not right: one line, naming the file, line and key."""


@dataclass(frozen=True)
class Setting:
    help: str  # one line or a few, shown above the key in the commented file
    range: tuple[float, float] | None = None  # inclusive, or above lo when low_open
    low_open: bool = False
    choices: tuple[str, ...] = ()
    table: str | None = None  # the [table] the key sits in
    percent: bool = False  # the file says percent; the model holds the fraction
    example: Any = None  # shown in the commented file for a key unset by default


def setting(
    default: Any,
    help: str,
    *,
    range: tuple[float, float] | None = None,
    low_open: bool = False,
    choices: tuple[str, ...] = (),
    table: str | None = None,
    percent: bool = False,
    example: Any = None,
) -> Any:
    """A settings field (see the module); a list default is copied for each instance."""
    meta = {_SETTING: Setting(help, range, low_open, choices, table, percent, example)}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def settings_of(cls: type) -> dict[str, tuple[dataclasses.Field[Any], Setting]]:
    """Every setting of CLS by name, in declaration order."""
    return {
        f.name: (f, f.metadata[_SETTING]) for f in dataclasses.fields(cls) if _SETTING in f.metadata
    }


def read_settings(
    cls: type[T],
    data: dict[str, Any],
    text: str,
    source: str,
    unknown: Literal["warn", "refuse"],
    **extra: Any,
) -> tuple[T, list[str]]:
    """(CLS made from DATA, the file SOURCE's parsed TEXT, with EXTRA; the warnings).
    SettingsError for a key of the wrong type or out of range, and for an unknown key
    when UNKNOWN is "refuse"."""
    declared = settings_of(cls)
    hints = typing.get_type_hints(cls)
    tables = {s.table for _, s in declared.values() if s.table}
    values: dict[str, Any] = {}
    warnings: list[str] = []

    def where(key: str, table: str | None) -> str:
        line = _line_of(text, key, table)
        return f"{source}:{line}" if line else source

    def read(key: str, value: Any, table: str | None) -> None:
        known = {n for n, (_, s) in declared.items() if s.table == table}
        if table is None:
            known |= tables
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = (
                f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(sorted(known))})"
            )
            if unknown == "refuse":
                raise SettingsError(f"{where(key, table)}: unknown key {key}{hint}")
            warnings.append(f"{where(key, table)}: unknown key {key} ignored{hint}")
            return
        if key in tables and table is None:
            if not isinstance(value, dict):
                raise SettingsError(f"{where(key, table)}: {key} must be a table, not {value!r}")
            for k, v in value.items():
                read(k, v, key)
            return
        s = declared[key][1]
        name = f"{table}.{key}" if table else key
        try:
            values[key] = _checked(value, hints[key], s)
        except ValueError as exc:
            raise SettingsError(f"{where(key, table)}: {name} {exc}") from None

    for key, value in data.items():
        read(key, value, None)
    return cls(**values, **extra), warnings


def _checked(value: Any, kind: Any, s: Setting) -> Any:
    base = _without_none(kind)
    if base is bool:
        if not isinstance(value, bool):  # strict: "no" or 0 is not a boolean
            raise ValueError(f"must be true or false, not {value!r}")
        return value
    if base is str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string, not {value!r}")
        if s.choices and value not in s.choices:
            raise ValueError(f"must be one of {', '.join(s.choices)}, not {value!r}")
        return value
    if typing.get_origin(base) is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"must be a list of strings, not {value!r}")
        return list(value)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if base is int and not (number and float(value).is_integer()):
        raise ValueError(f"must be a whole number, not {value!r}")
    if not number:
        raise ValueError(f"must be a number, not {value!r}")
    if s.range is not None:
        check_range(float(value), *s.range, low_open=s.low_open)
    if base is int:
        return int(value)
    return fraction_of_percent(float(value)) if s.percent else float(value)


def _without_none(kind: Any) -> Any:
    """X for `X | None`, else KIND."""
    if typing.get_origin(kind) not in (typing.Union, types.UnionType):
        return kind
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if len(args) == 1 else kind


def _line_of(text: str, key: str, table: str | None) -> int | None:
    """The line where KEY is set (in [TABLE] when given): TOML parsers do not say."""
    current = None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[] ")
            continue
        if current == table and re.match(rf'^["\']?{re.escape(key)}["\']?\s*=', stripped):
            return n
    return None


def commented(cls: type, header: str) -> str:
    """The settings file of CLS with every key commented out at its default, its help
    above it: what a fresh install gets and what the docs show."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    current: str | None = None
    instance = cls()
    for name, (_, s) in sorted(settings_of(cls).items(), key=lambda kv: kv[1][1].table or ""):
        if s.table != current:
            current = s.table
            out += ["", f"[{current}]"]
        out.append("")
        out += [f"# {line}" for line in s.help.splitlines()]
        value = getattr(instance, name)
        if s.percent:
            value = round(value * 100.0, 12)
        out.append(f"# {name} = {_toml(s.example if value is None else value)}")
    return "\n".join(out) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, str)):
        return json.dumps(value)
    return repr(value)
