"""DevicePlacement: the advisor inside Dask's scheduler. As tasks are submitted
(update_graph, before any is scheduled) each placed task's call gets a device kind:
its stream's (placement/stream.py, the single-node advisor's model code) for the
input's size bucket; a kind other than the CPU becomes a resource restriction, so that
Dask itself picks, among the workers offering that device, the least busy and the one
holding the data. The worker that ran a call reports its time and energy in the
task-finished message (the task's metadata), which the advisor learns from; the next
calls go where the runs say.

What a client sends is data, never code the scheduler runs: the input's size comes in
the call's key (PlacedTask.submit/map compute it on the client), else from what the
scheduler holds (other tasks' bytes, builtin containers' lengths, numpy arrays' bytes).
Dask events (Client.log_event) are never learnt from: any client may send one."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.dask.offer import OFFER_NAME, DeviceOffer
from adaptyst_top.dask.placed import (
    ANNOTATION,
    KINDS,
    METADATA,
    VERSION,
    PlacedTask,
    key_size,
)
from adaptyst_top.dask.untrusted import (
    clamp,
    func_kinds,
    func_name,
    own_len,
    own_nbytes,
    parse_run,
)
from adaptyst_top.placement.advisor import Advisor
from adaptyst_top.placement.objectives import OBJECTIVES, Objective
from adaptyst_top.placement.stream import TaskStream
from adaptyst_top.placement.task_keys import size_bucket

logger = logging.getLogger(__name__)

PLUGIN_NAME = "adaptyst-placement"
# Task names whose models the scheduler keeps (~25 KB each): the least recently used
# beyond it are forgotten, so that a flood of names cannot grow the scheduler for ever.
MAX_NAMES = 1024


@dataclass
class Named:
    """One task name's state: its advisor (models over sizes), its streams by size
    bucket, and its runs' figures by (bucket, kind, node): [runs, s, J, runs with J,
    failures]."""

    advisor: Advisor
    streams: dict[int, TaskStream] = field(default_factory=dict)
    figures: dict[tuple[int, str, str], list[float]] = field(default_factory=dict)


@dataclass
class Placement:
    """What the scheduler itself decided for a call: the only record a run is learnt
    against (an annotation can come from the client: dask.annotate)."""

    name: str | None  # None: the call was given an error, not a device
    bucket: int = 0
    kind: str = ""
    explored: bool = False
    size: int = 1
    done: bool = False  # its run, or failure, came back


class DevicePlacement(SchedulerPlugin):
    """Register once per cluster: client.register_plugin(DevicePlacement("time"))."""

    name = PLUGIN_NAME

    def __init__(
        self,
        objective: str = "time",
        weight: float = 0.5,
        cpu_power_model: str | None = None,
        max_names: int = MAX_NAMES,
    ) -> None:
        """CPU_POWER_MODEL ("IDLE_W:MAX_W"): the workers' CPU power where they have no RAPL,
        for the energy objectives (as the monitor's --cpu-power-model). MAX_NAMES: task
        names whose models are kept, the least recently used forgotten beyond it."""
        if objective not in OBJECTIVES:
            raise ValueError(
                f"DevicePlacement: objective {objective!r} is not one of {', '.join(OBJECTIVES)}"
            )
        if not (isinstance(weight, (int, float)) and 0.0 <= weight <= 1.0):
            raise ValueError(f"DevicePlacement: weight {weight!r} is not in [0, 1]")
        if type(max_names) is not int or max_names < 1:
            raise ValueError(f"DevicePlacement: max_names {max_names!r} is not a count >= 1")
        if cpu_power_model is not None:
            try:
                PowerModel.parse(cpu_power_model)
            except (ValueError, AttributeError) as exc:
                raise ValueError(f"DevicePlacement: {exc}") from None
        self.objective: Objective = objective
        self.weight = float(weight)
        self.cpu_power_model = cpu_power_model
        self.max_names = max_names
        self.version = VERSION
        self._fresh()

    def _fresh(self) -> None:
        self.scheduler: Any = None
        self.names: OrderedDict[str, Named] = OrderedDict()  # least recently used first
        self.names_dropped = 0
        self.placements: dict[Any, Placement] = {}  # task key -> its placement, until forgotten
        self.placed = 0
        self.place_ns = 0
        self.ignored = 0  # runs not learnt from: damaged, out of range, of a forgotten name
        self.sizes = {"client": 0, "inputs": 0, "unknown": 0}  # where calls' sizes came from
        self.energy_how: str | None = None  # how the workers measured the last joules

    # Only the settings travel to the scheduler; what it learns starts there.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "weight": self.weight,
            "cpu_power_model": self.cpu_power_model,
            "max_names": self.max_names,
            "version": self.version,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fresh()

    async def start(self, scheduler: Any) -> None:
        if self.version != VERSION:
            raise RuntimeError(
                f"DevicePlacement version {self.version} from the client, {VERSION} on the "
                "scheduler: install the same adaptyst-top on client, scheduler and workers"
            )
        self.scheduler = scheduler
        offer: bytes = dumps(DeviceOffer(self.cpu_power_model))  # type: ignore[no-untyped-call]
        # Not idempotent: a DevicePlacement registered again with other settings replaces it.
        await scheduler.register_worker_plugin(None, offer, name=OFFER_NAME, idempotent=False)

    # ----- placing ----------------------------------------------------------------------

    def offered(self) -> set[str]:
        """The device kinds some worker offers now (every worker has a CPU), from the
        scheduler's own index of resources (resource -> worker -> amount): a look per
        kind, not per worker (1,000 workers: bench/dask_eval.py)."""
        kinds = {"cpu"}
        for kind in KINDS:
            if any(n > 0 for n in self.scheduler.resources.get(kind, {}).values()):
                kinds.add(kind)
        return kinds

    def update_graph(self, scheduler: Any, *, tasks: Any = (), **kwargs: Any) -> None:
        offered: set[str] | None = None
        for key in tasks:
            if key in self.placements:  # placed when first submitted: submitted again
                continue
            ts = scheduler.tasks.get(key)
            spec = getattr(ts, "run_spec", None)
            func = getattr(spec, "func", None)
            if type(func) is not PlacedTask:  # a subclass's methods would be the client's code
                continue
            start = time.perf_counter_ns()
            offered = self.offered() if offered is None else offered
            placement, record = self.place(ts, spec, func, offered)
            self.placements[key] = record
            # Ours replaces any the client annotated: the worker runs what was decided here.
            ts.annotations = {**(ts.annotations or {}), ANNOTATION: placement}
            kind = placement.get("kind")
            if kind and kind != "cpu":  # beside the user's own restrictions, not instead
                ts.resource_restrictions = {**(ts.resource_restrictions or {}), kind: 1}
            self.placed += 1
            self.place_ns += time.perf_counter_ns() - start

    def place(
        self, ts: Any, spec: Any, func: PlacedTask, offered: set[str]
    ) -> tuple[dict[str, Any], Placement]:
        """The placement of one call: its kind, stream and size, or the error it raises."""
        version = func.__dict__.get("version")
        if type(version) is not int or version != VERSION:  # compared only as a plain int
            shown = version if type(version) is int else "?"
            return {
                "error": f"{func_name(func) or 'a placed task'}: made by adaptyst-top's "
                f"Dask API version {shown}, the scheduler's is {VERSION}: "
                "install the same adaptyst-top everywhere"
            }, Placement(None)
        name, kinds = func_name(func), func_kinds(func)
        if name is None or kinds is None:
            return {"error": "a placed task that is not one placed() made"}, Placement(None)
        usable = [k for k in kinds if k in offered]
        if not usable:
            return {
                "error": f"{name} has variants for {', '.join(sorted(kinds))} "
                f"but the workers offer {', '.join(sorted(offered))}"
            }, Placement(None)
        size, source = self.size_of(ts, spec, func)
        self.sizes[source] += 1
        bucket = size_bucket(size)
        stream = self.stream(name, bucket, usable)
        usable = [k for k in usable if k not in stream.dropped()] or usable
        kind, explored = stream.next_device()
        if kind not in usable:  # its workers left: the CPU, or what is there
            if explored:
                stream.trial_out = max(0, stream.trial_out - 1)  # that look is not made
            kind, explored = ("cpu" if "cpu" in usable else usable[0]), False
        placement = {
            "v": VERSION,
            "kind": kind,
            "stream": stream.task,
            "explored": explored,
            "size": size,
        }
        return placement, Placement(name, bucket, kind, explored, size)

    @staticmethod
    def size_of(ts: Any, spec: Any, func: PlacedTask) -> tuple[int, str]:
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

    def stream(self, name: str, bucket: int, usable: list[str]) -> TaskStream:
        named = self.names.get(name)
        if named is None:
            advisor = Advisor(usable, objective=self.objective, weight=self.weight)  # type: ignore[arg-type]
            named = self.names[name] = Named(advisor)
            self.forget_beyond_cap()
        else:
            self.names.move_to_end(name)
        for kind in usable:  # a kind a worker offers since
            if kind not in named.advisor.devices:
                named.advisor.devices.append(kind)
        stream = named.streams.get(bucket)
        if stream is None:
            start = "cpu" if "cpu" in usable else usable[0]
            stream = named.streams[bucket] = TaskStream(named.advisor, f"{name}@{bucket}", start)
        return stream

    def forget_beyond_cap(self) -> None:
        """Drop the least recently used names beyond max_names: their models, streams and
        figures go; their calls still running come back to nothing and are not learnt."""
        while len(self.names) > self.max_names:
            self.names.popitem(last=False)
            if self.names_dropped == 0:
                logger.warning(
                    "DevicePlacement: more than %d task names; the least recently used are "
                    "forgotten (placement_report: names.dropped)",
                    self.max_names,
                )
            self.names_dropped += 1

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        """Calls placed on a kind no worker offers any more would wait for one for ever
        (Dask's no-worker state): they run on the CPU, or a kind still there, instead.
        The streams and models stay: a worker offering the kind may come back."""
        offered = self.offered()
        moved = {}
        for ts in list(scheduler.unrunnable):
            record = self.placements.get(ts.key)
            func = getattr(ts.run_spec, "func", None)
            if record is None or record.name is None or type(func) is not PlacedTask:
                continue
            if record.kind in offered:
                continue
            usable = [k for k in (func_kinds(func) or ()) if k in offered]
            if not usable:
                continue  # nothing can run it: it waits for a worker, as any Dask task does
            kind = "cpu" if "cpu" in usable else usable[0]
            record.kind, record.explored = kind, False
            placement = (ts.annotations or {}).get(ANNOTATION) or {}
            ts.annotations = {
                **(ts.annotations or {}),
                ANNOTATION: {**placement, "kind": kind, "explored": False},
            }
            rest = {k: n for k, n in (ts.resource_restrictions or {}).items() if k not in KINDS}
            ts.resource_restrictions = {**rest, kind: 1} if kind != "cpu" else rest
            moved[ts.key] = "processing"
        if moved:
            scheduler.transitions(moved, stimulus_id=f"adaptyst-replace-{time.time()}")

    # ----- learning ---------------------------------------------------------------------

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        """A placed call's run or failure, from the scheduler's own record of it: the run's
        measurement from the task-finished message of the worker that ran it (its
        metadata; a client cannot send one), the failure from the task erring there."""
        if finish not in ("memory", "erred", "forgotten"):
            return  # every transition of every task comes here: the common case first
        if finish == "forgotten":
            self.placements.pop(key, None)
            return
        record = self.placements.get(key)
        if record is None or record.done or record.name is None or start != "processing":
            return
        record.done = True
        worker = kwargs.get("worker")
        if finish == "memory":
            self.learn(record, kwargs.get("metadata"), worker)
        else:
            self.failed(record, worker)

    def learn(self, record: Placement, metadata: Any, worker: Any) -> None:
        run = parse_run(metadata.get(METADATA) if type(metadata) is dict else None)
        named = self.names.get(record.name) if record.name is not None else None
        stream = named.streams.get(record.bucket) if named is not None else None
        if run is None or named is None or stream is None:
            self.ignored += 1
            return
        t, e, how = run
        fig = named.figures.setdefault(
            (record.bucket, record.kind, self.node_of(worker)), [0, 0.0, 0.0, 0, 0]
        )
        fig[0] += 1
        fig[1] += t
        if e is not None:
            fig[2] += e
            fig[3] += 1
            self.energy_how = how
        stream.ran(record.kind, (size_bucket(record.size), 0), t, e, record.size, record.explored)

    def failed(self, record: Placement, worker: Any) -> None:
        """A placed call that raised: the stream counts it, and an exploration's call is
        back."""
        named = self.names.get(record.name) if record.name is not None else None
        stream = named.streams.get(record.bucket) if named is not None else None
        if named is None or stream is None or record.kind not in stream.advisor.devices:
            return
        key = (record.bucket, record.kind, self.node_of(worker))
        named.figures.setdefault(key, [0, 0.0, 0.0, 0, 0])[4] += 1
        stream.failed(record.kind, record.explored)

    def node_of(self, address: Any) -> str:
        if not isinstance(address, str):
            return "?"
        ws = self.scheduler.workers.get(address) if self.scheduler is not None else None
        if ws is not None:
            return str(ws.host)
        return address.split("://")[-1].rsplit(":", 1)[0] or "?"

    # ----- report -----------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """Per task and input size: the device chosen, runs and mean time per device and
        node, moves and explorations, the gain over the CPU; the placing's cost; the
        names kept and forgotten; where the calls' sizes came from."""
        rows = []
        for name, named in sorted(self.names.items()):
            for bucket, stream in sorted(named.streams.items()):
                rows.append(row_of(name, bucket, stream, named.figures))
        per_task = self.place_ns / self.placed / 1e3 if self.placed else None
        return {
            "version": VERSION,
            "objective": self.objective,
            "placed": self.placed,
            "place_us_per_task": None if per_task is None else round(per_task, 2),
            "ignored_events": self.ignored,
            "energy_method": self.energy_how,
            "names": {
                "kept": len(self.names),
                "cap": self.max_names,
                "dropped": self.names_dropped,
            },
            "sizes": dict(self.sizes),
            "tasks": rows,
        }


def row_of(
    name: str, bucket: int, stream: TaskStream, figures: dict[tuple[int, str, str], list[float]]
) -> dict[str, Any]:
    runs: dict[str, int] = {}
    secs: dict[str, float] = {}
    joules: dict[str, list[float]] = {}
    nodes: dict[str, int] = {}
    for (b, kind, node), (n, total, j, nj, _) in figures.items():
        if b != bucket:
            continue
        add(runs, kind, int(n))
        add(secs, kind, total)
        if n:
            add(nodes, node, int(n))
        js = joules.setdefault(kind, [0.0, 0])
        js[0], js[1] = js[0] + j, js[1] + nj
    mean_ms = {k: round(1e3 * t / runs[k], 4) for k, t in secs.items() if runs[k]}
    mean_mj = {k: round(1e3 * j / n, 4) for k, (j, n) in joules.items() if n}
    here = mean_ms.get(stream.assigned)
    gain = None
    if here is not None and "cpu" in mean_ms and mean_ms["cpu"] > 0:
        gain = round(1 - here / mean_ms["cpu"], 4)
    return {
        "task": name,
        "size_bucket": bucket,
        "device": stream.assigned,
        "runs": runs,
        "mean_ms": mean_ms,
        "mean_mj": mean_mj,
        "failed": dict(stream.failures),
        "nodes": nodes,
        "moves": stream.moves,
        "explorations": stream.explorations,
        "gain_vs_cpu": gain,
        "predicted_ms": predicted_ms(stream),
    }


def add(counts: dict[str, Any], key: str, n: float) -> None:
    counts[key] = counts.get(key, 0) + n


def predicted_ms(stream: TaskStream) -> dict[str, float]:
    """What the advisor's models say a run of the stream's input costs on each kind."""
    st = stream.advisor.tasks.get(stream.task)
    if st is None or not st.current:
        return {}
    preds = stream.advisor.predictions(stream.task)
    return {d: round(1e3 * p.time_s, 4) for d, p in preds.items()}
