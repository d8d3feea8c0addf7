"""Probe specs, bpftrace-like (each kind's own syntax is in kinds/):

    uprobe:TARGET:FUNC                    entry-to-return latency of each function matching FUNC (a glob)
    usdt:TARGET:PROVIDER:NAME             hit count and rate of one USDT probe
    usdt:TARGET:PROVIDER:BEGIN..END       per-thread latency from BEGIN to the matching END (LIFO)
    ...@argN[:str|:int]                   split a probe's statistics by argument N (1-based;
                                          a uprobe's 1..6, those passed in registers)
    uprobe:TARGET:FUNC@retval[:str|:int]  split a function's statistics by what it returns

TARGET is a path or a library short name (`c` is libc). What every kind shares lives
here: the parsed spec, its error, and the @argN/@retval suffix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from adaptyst_top.snapshot.probes import ProbeKind

KeyType = Literal["auto", "str", "int"]

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARG = re.compile(r"^(?:arg([1-9][0-9]?)|(retval))(?::(str|int))?$")
_NAMES_ARG = re.compile(r"(arg\d|retval)")


class ProbeSpecError(ValueError):
    """A malformed spec; the message points at the bad part."""

    def __init__(self, spec: str, start: int, length: int, reason: str) -> None:
        self.spec, self.start, self.reason = spec, start, reason
        pointer = " " * start + "^" * max(1, length)
        super().__init__(f"bad probe spec: {reason}\n  {spec}\n  {pointer}")

    @property
    def one_line(self) -> str:
        return f"bad probe spec {self.spec!r}: {self.reason} (at column {self.start + 1})"


@dataclass(frozen=True)
class ProbeSpec:
    text: str
    kind: ProbeKind
    target: str
    func: str | None = None  # uprobe glob
    provider: str | None = None
    name: str | None = None  # usdt probe, or BEGIN of a pair
    end: str | None = None  # usdt END of a pair
    arg: int | None = None  # @argN, 1-based as bcc's and bpftrace's USDT arguments
    arg_type: KeyType = "auto"
    retval: bool = False  # @retval: a uprobe's statistics split by the return value
    file: str | None = None  # python: the glob over .py paths
    # Set by the kind that parsed it: the rows' name, and whether they time intervals.
    label: str = field(default="", compare=False)
    measures_latency: bool = field(default=False, compare=False)

    @property
    def keyed(self) -> bool:
        """Its statistics are split by a value (@argN or @retval)."""
        return self.arg is not None or self.retval

    @property
    def is_pair(self) -> bool:
        return self.end is not None


@dataclass(frozen=True)
class KeyRules:
    """How a kind reads an @argN/@retval suffix: the highest N (and why, said when past
    it), why @retval means nothing on it (None: it may be split by its return value), and
    whether a name may hold an @ of its own (a symbol's version, `memcpy@GLIBC_2.14`):
    there the last @ splits only when what follows names an argument or the return."""

    most_args: int
    why_most: str
    why_no_retval: str | None
    at_in_names: bool


@dataclass(frozen=True)
class Key:
    arg: int | None = None
    arg_type: KeyType = "auto"
    retval: bool = False


def split_key(spec: str, rest: str, rules: KeyRules) -> tuple[str, Key]:
    """REST without its key suffix, and the key (ProbeSpecError when it is malformed)."""
    at = rest.rfind("@")
    if at < 0:
        return rest, Key()
    tail = rest[at + 1 :]
    if rules.at_in_names and ('"' in tail or not _NAMES_ARG.match(tail)):
        return rest, Key()
    col = spec.rindex("@") + 1
    m = _ARG.fullmatch(tail)
    if not m:
        what = "@argN or @retval" if rules.why_no_retval is None else "@argN"
        raise ProbeSpecError(spec, col, len(tail), f"expected {what}, with :str or :int")
    arg_type: KeyType = m.group(3) or "auto"  # type: ignore[assignment]
    if m.group(2):
        if rules.why_no_retval is not None:
            raise ProbeSpecError(spec, col, len(tail), rules.why_no_retval)
        return rest[:at], Key(arg_type=arg_type, retval=True)
    arg = int(m.group(1))
    if arg > rules.most_args:
        raise ProbeSpecError(spec, col, len(tail), rules.why_most)
    return rest[:at], Key(arg=arg, arg_type=arg_type)
