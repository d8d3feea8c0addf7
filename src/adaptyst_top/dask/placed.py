"""A task's variants, one per device kind, as one callable that Dask runs where the
scheduler's placement chose (plugin.py): the chosen variant runs inside the task API's
USDT probes (the node's monitor and agent see the task), timed and its energy measured
(run_energy.py), and both go back to the scheduler as a Dask event."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any

from adaptyst_top.dask.offer import OFFER_NAME
from adaptyst_top.dask.run_energy import Measured
from adaptyst_top.placement import task_api

VERSION = 1  # the shape of the annotation and the events: tasks and plugin must agree
ANNOTATION = "adaptyst"  # the task annotation that carries the placement to the worker
TOPIC = "adaptyst-placement"  # the Dask event topic the workers report runs on
KINDS = ("cpu", "opencl", "cuda")  # device kinds, as workers name their resources
MAX_SIZE = 2**63 - 1  # what Dask's msgpack and the USDT probes carry


class PlacementError(RuntimeError):
    """A placed task that cannot run as asked; its message is one line for the user."""


class PlacedTask:
    """NAME's VARIANTS (device kind -> function of the same arguments) and SIZE (a
    function of those arguments: the input's size, what the models learn per)."""

    def __init__(
        self,
        name: str,
        variants: Mapping[str, Callable[..., Any]],
        size: Callable[..., float] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name or "|" in name or len(name) > 40:
            raise ValueError(f"placed: a task name is 1-40 characters, no '|': {name!r}")
        if not isinstance(variants, Mapping) or not variants:
            raise ValueError(f"placed: {name} needs at least one variant, as {{'cpu': f}}")
        for kind, fn in variants.items():
            if kind not in KINDS:
                raise ValueError(
                    f"placed: {name}: unknown device kind {kind!r} ({', '.join(KINDS)})"
                )
            if not callable(fn):
                raise ValueError(f"placed: {name}: the {kind} variant is not callable")
        if size is not None and not callable(size):
            raise ValueError(f"placed: {name}: size must be a function of the task's arguments")
        self.name = name
        self.variants = dict(variants)
        self.size = size
        self.version = VERSION
        self.token = uuid.uuid4().hex  # this task's identity in Dask's keys, pickled along
        self.__name__ = name  # Dask names the task's keys after it: "spmv-<token>"

    def __dask_tokenize__(self) -> tuple[str, str, str]:
        # Its own identity, not its functions' names: two closures of one factory share
        # a qualified name, and Dask would hand one's results for the other's calls.
        return ("adaptyst_top.dask.PlacedTask", self.name, self.token)

    def __repr__(self) -> str:
        return f"placed({self.name!r}, {sorted(self.variants)})"

    def input_size(self, *args: Any, **kwargs: Any) -> int:
        """The input's size, from SIZE, else the arguments' bytes; a finite count >= 1."""
        if self.size is None:
            n: Any = sum(int(getattr(a, "nbytes", 0)) for a in (*args, *kwargs.values()))
        else:
            n = self.size(*args, **kwargs)
        try:
            value = float(n)
        except (TypeError, ValueError):
            raise PlacementError(f"{self.name}: size() gave {n!r}, not a number") from None
        if not math.isfinite(value) or not 0 <= value <= MAX_SIZE:
            raise PlacementError(f"{self.name}: size() gave {n!r}, not a finite count in [0, 2^63)")
        return max(1, int(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        where = placement_here()
        if where is None:  # outside Dask, or no DevicePlacement: the first variant, CPU first
            kind = "cpu" if "cpu" in self.variants else next(iter(self.variants))
            return self.variants[kind](*args, **kwargs)
        worker, placement = where
        if placement.get("error"):
            raise PlacementError(str(placement["error"]))
        placed_on = placement.get("kind")
        fn = self.variants.get(placed_on) if isinstance(placed_on, str) else None
        if fn is None:
            raise PlacementError(
                f"{self.name}: placed on {placed_on!r}, a kind it has no variant for"
            )
        size = int(placement.get("size") or self.input_size(*args, **kwargs))
        offer = worker.plugins.get(OFFER_NAME)
        energy = getattr(offer, "energy", None)
        report = {
            "v": VERSION,
            "stream": placement.get("stream"),
            "kind": placed_on,
            "explored": bool(placement.get("explored")),
            "size": size,
            "worker": worker.address,
        }
        with (
            task_api.task(self.name, str(placed_on), size),
            energy.call(placed_on) if energy is not None else nullcontext(Measured()) as cost,
        ):
            start = time.perf_counter()  # the variant alone, not what measures it
            out = fn(*args, **kwargs)  # one that raises: the scheduler sees it erred
            took = time.perf_counter() - start
        report |= {"t": took, "e": cost.energy_j, "how": cost.method}
        worker.log_event(TOPIC, report)
        return out


def placed(
    name: str,
    variants: Mapping[str, Callable[..., Any]],
    size: Callable[..., float] | None = None,
) -> PlacedTask:
    """NAME's variants per device kind ("cpu", "opencl", "cuda"), as one function to
    submit to Dask (client.submit, client.map); SIZE gives an input's size from the
    call's arguments (default: their bytes)."""
    return PlacedTask(name, variants, size)


def placement_here() -> tuple[Any, dict[str, Any]] | None:
    """(the worker, the placement the scheduler gave the running task), or None outside
    a Dask worker's task or for a task the plugin did not place."""
    try:
        from dask.context import thread_state
        from distributed.worker import get_worker
    except ImportError:
        return None
    try:
        worker = get_worker()
    except ValueError:
        return None
    key: Any = getattr(thread_state, "key", None)
    ts = worker.state.tasks.get(key)
    placement = (ts.annotations or {}).get(ANNOTATION) if ts is not None else None
    return (worker, placement) if isinstance(placement, dict) else None
