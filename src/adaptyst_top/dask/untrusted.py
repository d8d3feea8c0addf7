"""What the scheduler reads from what clients and workers send (a pickled PlacedTask's
state, a call's arguments, a worker's report): plain values of known types and ranges
only, never a method of the client's objects, which would run its code here."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from adaptyst_top.dask.placed import KINDS, MAX_SIZE, VERSION, PlacedTask, key_size

MAX_RUN_S = 86_400.0  # a reported run longer than a day is no run of ours
MAX_RUN_J = 1e9  # nor one that drew more than a day of a 10 kW node
# What the scheduler may measure itself: builtin and numpy types, whose len() and
# nbytes are the interpreter's and numpy's own code, never a class the client sent.
SIZED_BY_LEN = (list, tuple, dict, str, bytes, bytearray, set, frozenset, range, memoryview)
SIZED_BY_BYTES = (bytes, bytearray)


def parse_run(run: Any) -> tuple[float, float | None, str | None] | None:
    """(seconds, joules or None, how) of a worker's report, or None unless it is one of
    this version, of plain numbers in range."""
    if type(run) is not dict or run.get("v") != VERSION:
        return None
    t, e, how = number_in(run.get("t"), MAX_RUN_S), run.get("e"), run.get("how")
    if t is None:
        return None
    if e is not None:
        e = number_in(e, MAX_RUN_J)
        if e is None:
            return None
    return t, e, (how[:40] if type(how) is str else None)


def number_in(value: Any, most: float) -> float | None:
    """VALUE as a float when it is a plain int or float (not a bool) in [0, MOST]."""
    if type(value) is int:  # compared as an int: a huge one does not fit a float
        return float(value) if 0 <= value <= most else None
    if type(value) is float and math.isfinite(value) and 0 <= value <= most:
        return value
    return None


def func_name(func: PlacedTask) -> str | None:
    """The task's name, read from its state (a PlacedTask the client pickled may hold
    anything): a str of 1-40 characters without '|', as placed() makes."""
    name = func.__dict__.get("name")
    ok = type(name) is str and 0 < len(name) <= 40 and "|" not in name
    return cast(str, name) if ok else None


def func_kinds(func: PlacedTask) -> list[str] | None:
    """Its variants' kinds: only a plain dict of known kinds is read (a Mapping the client
    sent could run its code here)."""
    variants = func.__dict__.get("variants")
    if type(variants) is not dict:
        return None
    kinds = [k for k in variants if type(k) is str and k in KINDS]
    return kinds or None


def own_len(value: Any) -> int | None:
    """len(VALUE) where the interpreter or numpy computes it, else None."""
    if type(value) in SIZED_BY_LEN:
        return len(value)
    if type(value) is np.ndarray and value.ndim >= 1:
        return int(value.shape[0])
    return None


def own_nbytes(value: Any) -> int:
    """VALUE's bytes where numpy or the interpreter knows them, else 0."""
    if type(value) is np.ndarray or type(value) is memoryview:
        return int(value.nbytes)
    if type(value) in SIZED_BY_BYTES:
        return len(value)
    return 0


def clamp(n: int) -> int:
    return min(MAX_SIZE, max(1, n))


def call_size(ts: Any, spec: Any, func: PlacedTask) -> tuple[int, str]:
    """The call's input size and where it came from, without running any of the
    client's code: the size the client computed (in the key), else the bytes of its
    inputs when they are other tasks' results (the workers measured them), else
    SIZE when it is len() or the default (bytes) over builtin or numpy values; else
    unknown: the bytes of those arguments the scheduler can measure, at least 1."""
    sent = key_size(getattr(ts, "key", None))
    if sent is not None:
        return max(1, sent), "client"
    if getattr(spec, "dependencies", None):
        nbytes = sum(max(0, int(getattr(d, "nbytes", 0) or 0)) for d in ts.dependencies)
        return clamp(nbytes), "inputs"
    args = tuple(getattr(spec, "args", ()) or ())
    kwargs = getattr(spec, "kwargs", None) or {}
    values = (*args, *(kwargs.values() if type(kwargs) is dict else ()))
    size_fn = func.__dict__.get("size")
    if size_fn is len and len(args) == 1 and not kwargs:
        n = own_len(args[0])
        if n is not None:
            return clamp(n), "inputs"
    nbytes = sum(own_nbytes(v) for v in values)
    return clamp(nbytes), ("inputs" if size_fn is None else "unknown")


def call_kinds(func: PlacedTask, offered: set[str]) -> tuple[str, list[str]] | str:
    """(the call's task name, the kinds offered that it has variants for), or the
    error the call raises instead, in one line."""
    version = func.__dict__.get("version")
    if type(version) is not int or version != VERSION:  # compared only as a plain int
        shown = version if type(version) is int else "?"
        return (
            f"{func_name(func) or 'a placed task'}: made by adaptyst-top's "
            f"Dask API version {shown}, the scheduler's is {VERSION}: "
            "install the same adaptyst-top everywhere"
        )
    name, kinds = func_name(func), func_kinds(func)
    if name is None or kinds is None:
        return "a placed task that is not one placed() made"
    usable = [k for k in kinds if k in offered]
    if not usable:
        return (
            f"{name} has variants for {', '.join(sorted(kinds))} "
            f"but the workers offer {', '.join(sorted(offered))}"
        )
    return name, usable
