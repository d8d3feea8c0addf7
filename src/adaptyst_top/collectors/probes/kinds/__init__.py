"""The probe kinds, each in its own module, and specs parsed by the kind they name."""

from __future__ import annotations

from adaptyst_top.collectors.probes.kinds.base import CalibrationCase, ProbeKindDef
from adaptyst_top.collectors.probes.kinds.cuda import Cuda
from adaptyst_top.collectors.probes.kinds.mpi import Mpi
from adaptyst_top.collectors.probes.kinds.opencl import OpenCL
from adaptyst_top.collectors.probes.kinds.python import Python
from adaptyst_top.collectors.probes.kinds.uprobe import Uprobe
from adaptyst_top.collectors.probes.kinds.usdt import Usdt
from adaptyst_top.collectors.probes.spec import ProbeSpec, ProbeSpecError, split_key

KINDS: dict[str, ProbeKindDef] = {
    k.name: k for k in (Uprobe(), Usdt(), OpenCL(), Cuda(), Python(), Mpi())
}
# The words a spec may start with: each kind's name and its aliases.
_BY_WORD: dict[str, ProbeKindDef] = {w: k for k in KINDS.values() for w in (k.name, *k.aliases)}
SPEC_PREFIXES = tuple(f"{w}:" for w in _BY_WORD)
SYNTAX = " | ".join(k.syntax for k in KINDS.values())
KINDS_HELP = " or ".join(f"{k.name} ({k.what})" for k in KINDS.values())


def kind_of(spec: ProbeSpec) -> ProbeKindDef:
    return KINDS[spec.kind]


def calibration_cases() -> list[CalibrationCase]:
    return [c for k in KINDS.values() for c in k.calibration]


def parse_spec(text: str) -> ProbeSpec:
    """TEXT as a spec of the kind its first word names; ProbeSpecError when malformed."""
    spec = text.strip()
    if not spec:
        raise ProbeSpecError(text, 0, 1, "empty spec")
    word, sep, rest = spec.partition(":")
    kind = _BY_WORD.get(word)
    if kind is None:
        names = " or ".join(KINDS)
        raise ProbeSpecError(spec, 0, len(word), f"unknown probe type {word!r} ({names})")
    if not sep:
        raise ProbeSpecError(spec, 0, len(word), f"expected {kind.shape}: a target and a name")
    rest, key = split_key(spec, rest, kind.keys)
    return kind.parse(spec, rest, len(word) + 1, key)
