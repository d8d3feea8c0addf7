"""The environment a command the monitor launches gets from its probes' kinds (OpenCL's
layer, CUDA's injection library), and what of the user's own it puts aside: the CUDA
driver loads one injection library, so one the user named (a profiler's) is replaced,
and the user is told so rather than left to wonder why the other tool went quiet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adaptyst_top.collectors.probes.kinds import kind_of
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.snapshot.inert import inert

SHOWN = 120  # characters of a replaced value a note shows


def command_env(
    specs: Sequence[ProbeSpec], budget: float, env: Mapping[str, str]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The variables to set over ENV (the command's own), and a line for each value of
    the user's a kind replaced."""
    added: dict[str, str] = {}
    notes: list[str] = []
    for spec in specs:
        kind = kind_of(spec)
        for name, value in kind.launch_env({**env, **added}, budget, spec).items():
            old = env.get(name)
            if name in kind.exclusive_env and name not in added and old and old != value:
                notes.append(
                    f"{inert(spec.text[:SHOWN])}: the command's {name} ({inert(old[:SHOWN])})"
                    " is replaced by this tool's: the tool it named will not run"
                )
            added[name] = value
    return added, tuple(notes)
