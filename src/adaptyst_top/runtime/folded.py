"""A recording's profile as folded stacks (`main;outer;leaf COUNT`), the input of
flamegraph.pl, speedscope and inferno: each stack's on-CPU samples, or its off-CPU ns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from adaptyst_top.snapshot import Snapshot

MAX_VALUE = 10**18  # ns: 31 years; a recording's larger figure is held here, not summed to inf


def _frame(name: str) -> str:
    # ';' separates frames and the last ' ' the count: a name keeps neither meaning.
    return name.replace(";", ":") or "[unknown]"


def folded(snapshots: Iterable[Snapshot], off: bool = False) -> Counter[str]:
    """Every stack's total over the snapshots (each holds what its interval added)."""
    out: Counter[str] = Counter()
    for snap in snapshots:
        if snap.profile is None:
            continue
        for s in snap.profile.stacks:
            value = min(MAX_VALUE, s.off_ns + s.runnable_ns) if off else s.samples
            if value > 0:
                key = ";".join(_frame(f) for f in s.frames)
                out[key] = min(MAX_VALUE, out[key] + round(value))
    return out


def folded_lines(counts: Counter[str]) -> list[str]:
    """One line a stack, heaviest first (ties by name: the same recording, the same text)."""
    return [f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
