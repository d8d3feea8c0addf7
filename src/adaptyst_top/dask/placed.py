"""A task's variants, one per device kind, as one callable that Dask runs where the
scheduler's placement chose (plugin.py): the chosen variant runs inside the task API's
USDT probes (the node's monitor and agent see the task), timed and its energy measured
(collectors/energy/calls.py). The measurement goes back to the scheduler in the worker's own
task-finished message (the task's metadata), the only report it learns from; a copy is
logged as a Dask event for people to read.

The input's size is the user's code (SIZE): it runs on the client, never on the
scheduler. PlacedTask.submit and .map run it there and send the size as data, in the
call's key ("...-s<size>"); a plain client.submit/map leaves the scheduler to size the
call from what it holds itself (placement in plugin.py)."""

from __future__ import annotations

import inspect
import math
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from typing import Any

from adaptyst_top.collectors.energy.calls import Measured
from adaptyst_top.dask.offer import OFFER_NAME
from adaptyst_top.placement import task_api

VERSION = 2  # the shape of the annotation, the key and the report: tasks and plugin agree
ANNOTATION = "adaptyst"  # the task annotation that carries the placement to the worker
METADATA = "adaptyst"  # the worker's task metadata entry that carries a run's measurement
TOPIC = "adaptyst-placement"  # the Dask event topic a copy of each run is logged under
KINDS = ("cpu", "opencl", "cuda")  # device kinds, as workers name their resources
MAX_SIZE = 2**63 - 1  # what Dask's msgpack and the USDT probes carry
# A size the client computed, as the last part of the call's key: ASCII digits only
# (Python's int() would also read other scripts' digits), at most MAX_SIZE's 19.
SIZE_SUFFIX = re.compile(r"-s([0-9]{1,19})\Z")


class PlacementError(RuntimeError):
    """A placed task that cannot run as asked; its message is one line for the user."""


def key_size(key: object) -> int | None:
    """The size a client sent in KEY, or None: keys are anyone's data, so only a string
    key ending in "-s" and at most 19 ASCII digits, within [0, MAX_SIZE], counts."""
    if type(key) is not str:
        return None
    m = SIZE_SUFFIX.search(key)
    if m is None:
        return None
    n = int(m.group(1))
    return n if n <= MAX_SIZE else None


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
        """The input's size, from SIZE, else the arguments' bytes; a finite count >= 1.
        Runs the user's SIZE: call it where user code runs (the client), never on the
        scheduler."""
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

    # ----- on the client: the size computed here, sent as data ---------------------------

    def submit(self, client: Any, *args: Any, **kwargs: Any) -> Any:
        """client.submit(self, *args, **kwargs), with the input's size computed here (SIZE
        raises here, as PlacementError) and sent in the call's key. KEY, if given, is the
        key's beginning; Dask's own options (pure, resources, ...) pass through."""
        own = _options(client.submit)
        fn_kwargs = {k: v for k, v in kwargs.items() if k not in own}
        size = self._client_size(args, fn_kwargs)
        key = kwargs.pop("key", None)
        if key is None:
            pure = kwargs.get("pure", True)
            token = _token(self, fn_kwargs, args) if pure else uuid.uuid4().hex
            key = f"{self.name}-{token}"
        elif not isinstance(key, str):
            raise ValueError(f"{self.name}.submit: key must be a string, the key's beginning")
        if size is not None:
            key = f"{key}-s{size}"
        return client.submit(self, *args, key=key, **kwargs)

    def map(self, client: Any, *iterables: Iterable[Any], **kwargs: Any) -> list[Any]:
        """client.map(self, *iterables, **kwargs), each call's size computed here and sent
        in its key. KEY, if given, is a string (the keys' beginning) or a list of keys."""
        own = _options(client.map)
        fn_kwargs = {k: v for k, v in kwargs.items() if k not in own}
        columns = [list(it) for it in iterables]
        calls = list(zip(*columns, strict=False))  # as Dask: as many calls as the shortest
        sizes = [self._client_size(args, fn_kwargs) for args in calls]
        key = kwargs.pop("key", None)
        if isinstance(key, list):
            if len(key) != len(calls) or not all(isinstance(k, str) for k in key):
                raise ValueError(f"{self.name}.map: {len(calls)} string keys, one a call")
            keys = list(key)
        elif key is None or isinstance(key, str):
            prefix = key or self.name
            if kwargs.get("pure", True):
                base = _token(self, fn_kwargs)
                keys = [f"{prefix}-{_token(base, args)}" for args in calls]
            else:
                uid = uuid.uuid4().hex
                keys = [f"{prefix}-{uid}-{i}" for i in range(len(calls))]
        else:
            raise ValueError(f"{self.name}.map: key must be a string or a list of keys")
        keys = [k if n is None else f"{k}-s{n}" for k, n in zip(keys, sizes, strict=True)]
        return list(client.map(self, *columns, key=keys, **kwargs))

    def _client_size(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        """The call's size here, or None where its arguments are other tasks' results
        (futures): only the workers hold those, and the scheduler knows their bytes."""
        from distributed import Future

        if any(isinstance(a, Future) for a in (*args, *kwargs.values())):
            return None
        try:
            return self.input_size(*args, **kwargs)
        except PlacementError:
            raise
        except Exception as e:  # the user's size function: its error, in one line
            raise PlacementError(f"{self.name}: size() failed: {type(e).__name__}: {e}") from e

    # ----- on the worker --------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        where = placement_here()
        if where is None:  # outside Dask, or no DevicePlacement: the first variant, CPU first
            kind = "cpu" if "cpu" in self.variants else next(iter(self.variants))
            return self.variants[kind](*args, **kwargs)
        worker, metadata, placement = where
        if placement.get("error"):
            raise PlacementError(str(placement["error"]))
        placed_on = placement.get("kind")
        fn = self.variants.get(placed_on) if isinstance(placed_on, str) else None
        if fn is None:
            raise PlacementError(
                f"{self.name}: placed on {placed_on!r}, a kind it has no variant for"
            )
        # The scheduler's size, never SIZE here: the worker's thread is not the user's
        # size function's to hold (it ran on the client, or the scheduler sized the call).
        size = placement.get("size")
        size = size if type(size) is int and 1 <= size <= MAX_SIZE else 1
        offer = worker.plugins.get(OFFER_NAME)
        energy = getattr(offer, "energy", None)
        with (
            task_api.task(self.name, str(placed_on), size),
            energy.call(placed_on) if energy is not None else nullcontext(Measured()) as cost,
        ):
            start = time.perf_counter()  # the variant alone, not what measures it
            out = fn(*args, **kwargs)  # one that raises: the scheduler sees it erred
            took = time.perf_counter() - start
        run = {"v": VERSION, "t": took, "e": cost.energy_j, "how": cost.method}
        # Into this task's own metadata: the worker sends it with the task-finished
        # message on its own connection, which no client can write to. Written before
        # the task returns; the worker builds that message after.
        metadata[METADATA] = run
        worker.log_event(  # for people (client.get_events); the scheduler ignores it
            TOPIC,
            {
                **run,
                "stream": placement.get("stream"),
                "kind": placed_on,
                "explored": bool(placement.get("explored")),
                "size": size,
                "worker": worker.address,
            },
        )
        return out


def placed(
    name: str,
    variants: Mapping[str, Callable[..., Any]],
    size: Callable[..., float] | None = None,
) -> PlacedTask:
    """NAME's variants per device kind ("cpu", "opencl", "cuda"), as one function to
    submit to Dask (client.submit, client.map; or f.submit(client, ...), f.map(client,
    ...), which compute SIZE, an input's size from the call's arguments (default: their
    bytes), on the client)."""
    return PlacedTask(name, variants, size)


def _options(method: Callable[..., Any]) -> set[str]:
    """The keyword options of a Client method: the rest of a call's keywords are the
    task's own (Client.submit and Client.map pass them on to it)."""
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {n for n, p in inspect.signature(method).parameters.items() if p.kind in kinds}


def _token(*parts: Any) -> str:
    from dask.base import tokenize

    return str(tokenize(*parts))


def placement_here() -> tuple[Any, dict[str, Any], dict[str, Any]] | None:
    """(the worker, the running task's metadata, the placement the scheduler gave it), or
    None outside a Dask worker's task or for a task the plugin did not place."""
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
    if ts is None:
        return None
    placement = (ts.annotations or {}).get(ANNOTATION)
    return (worker, ts.metadata, placement) if isinstance(placement, dict) else None
