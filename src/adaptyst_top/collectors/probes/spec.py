"""Probe specs, bpftrace-like:

    uprobe:TARGET:FUNC                    entry-to-return latency of each function matching FUNC (a glob)
    usdt:TARGET:PROVIDER:NAME             hit count and rate of one USDT probe
    usdt:TARGET:PROVIDER:BEGIN..END       per-thread latency from BEGIN to the matching END (LIFO)
    ...@argN[:str|:int]                   split a usdt probe's statistics by argument N (1-based)

TARGET is a path or a library short name (`c` is libc).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

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


_ARG = re.compile(r"^arg([1-9][0-9]?)(?::(str|int))?$")


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
    arg: int | None = None  # @argN, 1-based like bcc's bpf_usdt_readarg
    arg_type: KeyType = "auto"

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
    if "@" in rest and kind == "usdt":
        rest, _, argtext = rest.rpartition("@")
        m = _ARG.match(argtext)
        if not m:
            col = spec.rindex("@") + 1
            raise ProbeSpecError(spec, col, len(argtext), "expected @argN, @argN:str or @argN:int")
        arg = int(m.group(1))
        arg_type = m.group(2) or "auto"  # type: ignore[assignment]
        if arg > 12:
            raise ProbeSpecError(
                spec, spec.rindex("@") + 1, len(argtext), "USDT has arguments 1..12"
            )

    if kind == "uprobe":
        target, sep, func = _split_function(rest)
        if not sep or not target:
            raise ProbeSpecError(spec, body_start, len(rest), "expected uprobe:TARGET:FUNC")
        if len(func) > 2 and func[0] == func[-1] == '"' and '"' not in func[1:-1]:
            # Quoted: a demangled name with spaces or parentheses, "ns::f(int, char)".
            return ProbeSpec(spec, "uprobe", target, func=func[1:-1])
        if not func or not _GLOB.match(func):
            raise ProbeSpecError(
                spec, body_start + len(target) + 1, len(func) or 1, "bad function glob"
            )
        return ProbeSpec(spec, "uprobe", target, func=func)

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
