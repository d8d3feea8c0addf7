"""Probe specs, bpftrace-like:

    uprobe:TARGET:FUNC                    entry-to-return latency of each function matching FUNC (a glob)
    usdt:TARGET:PROVIDER:NAME             hit count and rate of one USDT probe
    usdt:TARGET:PROVIDER:BEGIN..END       per-thread latency from BEGIN to the matching END (LIFO)
    ...@argN[:str|:int]                   split a probe's statistics by argument N (1-based;
                                          a uprobe's 1..6, those passed in registers)
    uprobe:TARGET:FUNC@retval[:str|:int]  split a function's statistics by what it returns

TARGET is a path or a library short name (`c` is libc).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

KeyType = Literal["auto", "str", "int"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A symbol or a demangled name (C++ `ns::Class::method`, templates, destructors); with
# spaces or parentheses it is quoted.
_GLOB = re.compile(r"^[A-Za-z0-9_.$*?\[\]!@:<>~,&+-]+$")
_SINGLE_COLON = re.compile(r"(?<!:):(?!:)")


def _split_function(rest: str) -> tuple[str, str, str]:
    """TARGET and FUNC at the last colon that is not part of a C++ `::` (outside quotes)."""
    quote = rest.find('"')
    scan = rest if quote < 0 else rest[:quote]
    last = None
    for m in _SINGLE_COLON.finditer(scan):
        last = m.start()
    if last is None:
        return rest, "", ""
    return rest[:last], ":", rest[last + 1 :]


_ARG = re.compile(r"^(?:arg([1-9][0-9]?)|(retval))(?::(str|int))?$")
UPROBE_ARGS = 6  # x86-64's integer argument registers: what a uprobe's entry can read


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
    kind: Literal["uprobe", "usdt"]
    target: str
    func: str | None = None  # uprobe glob
    provider: str | None = None
    name: str | None = None  # usdt probe, or BEGIN of a pair
    end: str | None = None  # usdt END of a pair
    arg: int | None = None  # @argN, 1-based as bcc's and bpftrace's USDT arguments
    arg_type: KeyType = "auto"
    retval: bool = False  # @retval: a uprobe's statistics split by the return value

    @property
    def keyed(self) -> bool:
        """Its statistics are split by a value (@argN or @retval)."""
        return self.arg is not None or self.retval

    @property
    def is_pair(self) -> bool:
        return self.end is not None

    @property
    def measures_latency(self) -> bool:
        return self.kind == "uprobe" or self.is_pair

    @property
    def label(self) -> str:
        if self.kind == "uprobe":
            return str(self.func)
        probe = f"{self.name}..{self.end}" if self.is_pair else str(self.name)
        return f"{self.provider}:{probe}"


def parse_spec(text: str) -> ProbeSpec:
    spec = text.strip()
    if not spec:
        raise ProbeSpecError(text, 0, 1, "empty spec")
    kind, sep, rest = spec.partition(":")
    if not sep and kind in ("uprobe", "usdt", "u"):
        shape = "usdt:TARGET:PROVIDER:NAME" if kind == "usdt" else "uprobe:TARGET:FUNC"
        raise ProbeSpecError(spec, 0, len(kind), f"expected {shape}: a target and a name")
    if not sep or kind not in ("uprobe", "usdt", "u"):
        raise ProbeSpecError(spec, 0, len(kind), f"unknown probe type {kind!r} (uprobe or usdt)")
    kind = "uprobe" if kind == "u" else kind
    body_start = len(kind) + 1 if spec.startswith(kind) else 2

    arg: int | None = None
    arg_type: KeyType = "auto"
    retval = False
    # A uprobe's symbol may hold an @ of its own (`memcpy@GLIBC_2.14`): there the last
    # @ outside quotes splits only when what follows names an argument or the return.
    at = rest.rfind("@")
    tail = rest[at + 1 :] if at >= 0 else ""
    if at >= 0 and (kind == "usdt" or ('"' not in tail and re.match(r"(arg\d|retval)", tail))):
        rest, argtext = rest[:at], rest[at + 1 :]
        col = spec.rindex("@") + 1
        m = _ARG.fullmatch(argtext)
        if not m:
            what = "@argN or @retval" if kind == "uprobe" else "@argN"
            raise ProbeSpecError(spec, col, len(argtext), f"expected {what}, with :str or :int")
        arg_type = m.group(3) or "auto"  # type: ignore[assignment]
        if m.group(2):
            if kind == "usdt":
                raise ProbeSpecError(spec, col, len(argtext), "a USDT probe has no @retval")
            retval = True
        else:
            arg = int(m.group(1))
            most = UPROBE_ARGS if kind == "uprobe" else 12
            if arg > most:
                why = (
                    f"a uprobe reads arguments 1..{UPROBE_ARGS} (those in registers)"
                    if kind == "uprobe"
                    else "USDT has arguments 1..12"
                )
                raise ProbeSpecError(spec, col, len(argtext), why)

    if kind == "uprobe":
        keyed: dict[str, Any] = {"arg": arg, "arg_type": arg_type, "retval": retval}
        target, sep, func = _split_function(rest)
        if not sep or not target:
            raise ProbeSpecError(spec, body_start, len(rest), "expected uprobe:TARGET:FUNC")
        if len(func) > 2 and func[0] == func[-1] == '"' and '"' not in func[1:-1]:
            # Quoted: a demangled name with spaces or parentheses, "ns::f(int, char)".
            return ProbeSpec(spec, "uprobe", target, func=func[1:-1], **keyed)
        if not func or not _GLOB.match(func):
            raise ProbeSpecError(
                spec, body_start + len(target) + 1, len(func) or 1, "bad function glob"
            )
        return ProbeSpec(spec, "uprobe", target, func=func, **keyed)

    parts = rest.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise ProbeSpecError(spec, body_start, len(rest), "expected usdt:TARGET:PROVIDER:NAME")
    target, provider, name = parts
    prov_col = body_start + len(target) + 1
    if not _IDENT.match(provider):
        raise ProbeSpecError(spec, prov_col, len(provider) or 1, "bad USDT provider")
    name_col = prov_col + len(provider) + 1
    end: str | None = None
    if ".." in name:
        name, _, end = name.partition("..")
        if not _IDENT.match(end):
            raise ProbeSpecError(
                spec, name_col + len(name) + 2, len(end) or 1, "bad END probe name"
            )
    if not _IDENT.match(name):
        raise ProbeSpecError(spec, name_col, len(name) or 1, "bad USDT probe name")
    return ProbeSpec(
        spec, "usdt", target, provider=provider, name=name, end=end, arg=arg, arg_type=arg_type
    )
