"""Function names as the source spells them: C++ (the system's `__cxa_demangle`, through
cxxfilt), Rust (legacy and v0, through rust-demangler; the legacy hash dropped) and
gfortran's module procedures (`__solver_MOD_step` is `solver::step`).

Compiler suffixes (`.isra.0`, `.constprop.1`, `.part.0`, `.cold`...) name a copy the
optimiser made of a function: they are kept apart from the name and shown after it;
a `.cold` part is the unlikely branch of a function split off, not a function of its
own, and is never probed as one.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from functools import lru_cache

# The copies' words: `.isra.0`, `.constprop.1`, `.cold`... (a number may follow each).
COPIES = frozenset(("isra", "constprop", "part", "cold", "lto_priv", "localalias", "clone", "llvm"))
_RUST_LEGACY_HASH = re.compile(r"::h[0-9a-f]{16}$")
_RUST_LEGACY = re.compile(r"^_ZN.*17h[0-9a-f]{16}E$")
_FORTRAN_MODULE = re.compile(r"^__([A-Za-z][A-Za-z0-9_]*?)_MOD_([A-Za-z][A-Za-z0-9_]*)$")


@dataclass(frozen=True)
class Name:
    raw: str  # the symbol, as the ELF file has it (what the kernel attaches to)
    source: str  # as the source spells it: "solver::Kernel::step(int)"
    suffix: str = ""  # a compiler's copy: ".isra.0" (without it in `source`)

    @property
    def cold(self) -> bool:
        return ".cold" in self.suffix

    @property
    def display(self) -> str:
        """What a row shows: the source name, the copy's suffix after it."""
        return f"{self.source} [{self.suffix.lstrip('.')}]" if self.suffix else self.source

    @property
    def bare(self) -> str:
        """The source name without its parameter list and a template's return type:
        "solver::Kernel::step", "solver::twice<double>"."""
        text = self.source
        if text.endswith(")") and "(" in text:
            depth = 0
            for i in range(len(text) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(text[i], 0)
                if depth == 0:
                    text = text[:i]
                    break
        depth = 0
        for i in range(len(text) - 1, -1, -1):  # a return type ends at a space outside <>
            depth += {">": 1, "<": -1}.get(text[i], 0)
            if depth == 0 and text[i] == " " and not text.startswith("operator", i + 1):
                return text[i + 1 :]
        return text


def split_copy(raw: str) -> tuple[str, str]:
    """(the function's name, the copy's suffix) of RAW: `f.isra.0.cold` is (`f`,
    `.isra.0.cold`). Peeled off the end a word at a time, in time linear in the name
    (a regular expression searched from every dot took seconds on a hostile name of
    60,000 characters, with the interpreter held)."""
    cut = len(raw)
    while (dot := raw.rfind(".", 0, cut)) >= 0:
        word = raw[dot + 1 : cut]
        if word.isascii() and word.isdigit():  # a number belongs to the word before it
            before = raw.rfind(".", 0, dot)
            if before < 0 or raw[before + 1 : dot] not in COPIES:
                break
            dot = before
        elif word not in COPIES:
            break
        cut = dot
    return (raw, "") if cut == 0 else (raw[:cut], raw[cut:])  # all suffix: no name


@lru_cache(maxsize=65536)
def demangle(raw: str) -> Name:
    """RAW as its source spells it (itself when it is not mangled or cannot be read)."""
    base, suffix = split_copy(raw)
    return Name(raw, _source(base), suffix)


def name_of(raw: str, source: str | None) -> Name:
    """RAW's Name where SOURCE (its demangled base) was found elsewhere (the agent's
    user worker); demangled here when it is None."""
    if source is None:
        return demangle(raw)
    return Name(raw, source, split_copy(raw)[1])


def _source(base: str) -> str:
    if base.startswith("_R") or _RUST_LEGACY.match(base):
        import rust_demangler  # type: ignore[import-untyped]

        try:
            return _RUST_LEGACY_HASH.sub("", str(rust_demangler.demangle(base)))
        except Exception:
            return base
    if base.startswith("_Z"):
        import cxxfilt  # type: ignore[import-untyped]

        try:
            return str(cxxfilt.demangle(base))
        except Exception:
            return base
    if m := _FORTRAN_MODULE.match(base):
        return f"{m.group(1)}::{m.group(2)}"
    return base


def matches(name: Name, glob: str) -> bool:
    """A spec's glob against every spelling: the symbol, the source name with and
    without its parameters, and the shown one. `{a,b}` in it is either (alternatives)."""
    pattern = compiled(glob)
    return any(
        pattern.match(text) is not None
        for text in dict.fromkeys((name.raw, name.source, name.bare, name.display))
    )


MAX_ALTERNATIVES = 64
# What a brace's alternatives may hold: a symbol's characters and wildcards. A C++
# name's own braces (`f()::{lambda(int)#1}`) are part of the name, never alternatives.
_ALTERNATIVE = re.compile(r"^[A-Za-z0-9_.$*?]*$")
_BRACES = re.compile(r"\{([^{}]*)\}")


@functools.lru_cache(maxsize=256)
def compiled(glob: str) -> re.Pattern[str]:
    """GLOB as one pattern: fnmatch's, where one `{a,b,...}` of plain alternatives (at
    most MAX_ALTERNATIVES) is either, as a shell spells it out: `MPI_{Wait*,Barrier}` is
    `MPI_Wait*` or `MPI_Barrier`. Anything else in braces is the name's own."""
    m = _BRACES.search(glob)
    parts = m.group(1).split(",") if m else []
    if m is None or len(parts) > MAX_ALTERNATIVES or not all(_ALTERNATIVE.match(p) for p in parts):
        return re.compile(fnmatch.translate(glob))
    head, tail = glob[: m.start()], glob[m.end() :]
    either = "|".join(_inner(p) for p in parts)
    return re.compile(f"(?s:{_inner(head)}(?:{either}){_inner(tail)})\\Z")


def _inner(glob: str) -> str:
    """fnmatch's pattern for GLOB without its `(?s:` ... `)\\Z` wrapping."""
    whole = fnmatch.translate(glob)
    if whole.startswith("(?s:") and whole.endswith(")\\Z"):
        return whole[4:-3]
    return re.escape(glob)  # an fnmatch of another shape: the glob taken literally


__all__ = ["Name", "demangle", "matches"]
