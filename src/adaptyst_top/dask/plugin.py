"""DevicePlacement: the learner inside Dask's scheduler. As tasks are submitted
(update_graph, before any is scheduled) the placed calls of each task name whose inputs
exist are placed as a round by the name's learner (placement/learner.py: one model over
sizes per kind; a kind not run yet looks with the round's smallest call, the rest go
where they are predicted to finish first over the kinds' queues). A call whose inputs
are still to be computed is placed for now on the CPU, and for good when they are all
in memory, in a round with the calls made ready with it: by then the runs before
it have taught the learner. A kind other than the CPU becomes a resource restriction, so
that Dask itself picks, among the workers offering that device, the least busy and the
one holding the data. The worker that ran a call reports its time and energy in the
task-finished message (the task's metadata), which the learner learns from; the next
calls go where the runs say.

What a client sends is data, never code the scheduler runs: the input's size comes in
the call's key (PlacedTask.submit/map compute it on the client), else from what the
scheduler holds (other tasks' bytes, builtin containers' lengths, numpy arrays' bytes).
Dask events (Client.log_event) are never learnt from: any client may send one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.dask.names import Names
from adaptyst_top.dask.offer import OFFER_NAME, DeviceOffer
from adaptyst_top.dask.placed import (
    ANNOTATION,
    KINDS,
    METADATA,
    VERSION,
    PlacedTask,
)
from adaptyst_top.dask.report_rows import report_of
from adaptyst_top.dask.untrusted import call_kinds, call_size, func_kinds, parse_run
from adaptyst_top.placement.learned_stream import LearnedStream
from adaptyst_top.placement.objectives import OBJECTIVES, Objective
from adaptyst_top.placement.task_keys import size_bucket

PLUGIN_NAME = "adaptyst-placement"
# Task names whose models the scheduler keeps (~25 KB each): the least recently used
# beyond it are forgotten, so that a flood of names cannot grow the scheduler for ever.
MAX_NAMES = 1024


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
    predicted_s: float = 0.0  # its predicted time, on its kind's queue while processing
    queued: bool = False  # on its kind's queue: processing on a worker now
    pool: tuple[str, ...] = ()  # the kinds it may go to


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
        self.names = Names(self.objective, self.weight, self.max_names)
        self.placements: dict[Any, Placement] = {}  # task key -> its placement, until forgotten
        self.placed = 0
        self.place_ns = 0
        self.ignored = 0  # runs not learnt from: damaged, out of range, of a forgotten name
        self.sizes = {"client": 0, "inputs": 0, "unknown": 0}  # where calls' sizes came from
        self.energy_how: str | None = None  # how the workers measured the last joules
        self.pending: dict[str, float] = {}  # kind -> predicted s of its calls not back
        # Calls submitted before their inputs exist, placed for now where the learner
        # would put them, and placed for good when their inputs are all in memory.
        self.deferred: set[Any] = set()

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
        """Place the calls submitted together as a round (place_rounds); a call whose
        inputs are still to be computed is placed for good as a round with those made
        ready with it (ready_after)."""
        start = time.perf_counter_ns()
        offered: set[str] | None = None
        rounds: dict[tuple[str, tuple[str, ...]], list[tuple[Any, Placement]]] = {}
        for key in tasks:
            if key in self.placements:  # placed when first submitted: submitted again
                continue
            ts = scheduler.tasks.get(key)
            spec = getattr(ts, "run_spec", None)
            func = getattr(spec, "func", None)
            if type(func) is not PlacedTask:  # a subclass's methods would be the client's code
                continue
            offered = self.offered() if offered is None else offered
            checked = call_kinds(func, offered)
            self.placed += 1
            if isinstance(checked, str):
                self.placements[key] = Placement(None)
                self.annotate(ts, {"error": checked})
                continue
            record = self.placements[key] = Placement(checked[0], pool=tuple(checked[1]))
            if any(dts.state != "memory" for dts in ts.dependencies):
                self.defer(ts, record)  # its size too is known only then
                continue
            self.size_up(ts, spec, func, record)
            rounds.setdefault((checked[0], record.pool), []).append((ts, record))
        self.place_rounds(rounds)
        self.place_ns += time.perf_counter_ns() - start

    def defer(self, ts: Any, record: Placement) -> None:
        """For now on the CPU (else its first kind); no look, queue or report counts it
        yet, and its stream is its size's, known when its inputs are."""
        record.kind = "cpu" if "cpu" in record.pool else record.pool[0]
        self.deferred.add(ts.key)
        self.annotate(ts, self.placement_of(record))

    def ready_after(self, key: Any) -> None:
        """KEY's result is in memory: the deferred calls it made ready (the scheduler
        sends them to workers next, in this same batch of transitions) are placed now,
        as one round, with what the runs so far taught."""
        ts = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        rounds: dict[tuple[str, tuple[str, ...]], list[tuple[Any, Placement]]] = {}
        offered: set[str] | None = None
        for dts in getattr(ts, "dependents", ()):
            if dts.key not in self.deferred or dts.waiting_on or dts.state != "waiting":
                continue
            self.deferred.discard(dts.key)
            record = self.placements[dts.key]
            offered = self.offered() if offered is None else offered  # workers left since
            record.pool = tuple(k for k in record.pool if k in offered) or record.pool
            self.size_up(dts, dts.run_spec, dts.run_spec.func, record)
            rounds.setdefault((record.name or "", record.pool), []).append((dts, record))
        if rounds:
            start = time.perf_counter_ns()
            self.place_rounds(rounds)
            self.place_ns += time.perf_counter_ns() - start

    def place_rounds(self, rounds: dict[tuple[str, tuple[str, ...]], list[Any]]) -> None:
        """Each name's calls placed together by its learner (learner.place_round): each
        kind not run yet looks with the round's smallest call, the rest go where they
        are predicted to finish first over the kinds' queues."""
        ready = self.queued_s() if rounds else {}
        for (name, pool), calls in rounds.items():
            # A flood of names in one graph may have pushed this one out already: its
            # calls go to the CPU, and their runs come back to nothing (ignored).
            named = self.names.get(name)
            sizes = [r.size for _, r in calls]
            looks: list[bool] = []
            kinds = (
                named.learner.place_round(name, sizes, ready, among=pool, looks=looks)
                if named is not None
                else ["cpu" if "cpu" in pool else pool[0]] * len(calls)
            )
            for i, ((ts, record), kind) in enumerate(zip(calls, kinds, strict=True)):
                stream = named.streams.get(record.bucket) if named is not None else None
                was, record.kind = record.kind, kind
                if named is not None and stream is not None:
                    record.explored = looks[i]
                    stream.placed(kind, record.size, looks[i])
                    record.predicted_s = named.learner.predicted_s(name, kind, record.size)
                    # The next rounds of this graph queue behind this one.
                    ready[kind] = ready.get(kind, 0.0) + record.predicted_s / self.slots(kind)
                self.annotate(ts, self.placement_of(record), was)

    @staticmethod
    def placement_of(record: Placement) -> dict[str, Any]:
        return {
            "v": VERSION,
            "kind": record.kind,
            "stream": f"{record.name}@{record.bucket}",
            "explored": record.explored,
            "size": record.size,
        }

    @staticmethod
    def annotate(ts: Any, placement: dict[str, Any], was: str = "") -> None:
        """WAS: the kind this call was placed on before, whose restriction goes."""
        # Ours replaces any the client annotated: the worker runs what was decided here.
        ts.annotations = {**(ts.annotations or {}), ANNOTATION: placement}
        kind = placement.get("kind")
        # Beside the user's own restrictions, not instead.
        rest = {k: n for k, n in (ts.resource_restrictions or {}).items() if k != was}
        ts.resource_restrictions = {**rest, kind: 1} if kind and kind != "cpu" else rest

    def queued_s(self) -> dict[str, float]:
        """Per kind, the predicted seconds of its calls processing on a worker now (the
        calls waiting on others, or parked, hold no device), over its slots."""
        return {kind: pending / self.slots(kind) for kind, pending in self.pending.items()}

    def slots(self, kind: str) -> float:
        """The calls of KIND that run at once: threads for the CPU, else its resources."""
        if kind == "cpu":
            n = getattr(self.scheduler, "total_nthreads", 1)
        else:
            n = sum(self.scheduler.resources.get(kind, {}).values())
        return max(1.0, float(n or 1))

    def size_up(self, ts: Any, spec: Any, func: PlacedTask, record: Placement) -> None:
        """The call's size, its stream's bucket, and its kinds less those left out."""
        record.size, source = call_size(ts, spec, func)
        self.sizes[source] += 1
        record.bucket = size_bucket(record.size)
        stream = self.stream(record.name or "", record.bucket, list(record.pool))
        record.pool = tuple(k for k in record.pool if k not in stream.dropped()) or record.pool

    def stream(self, name: str, bucket: int, usable: list[str]) -> LearnedStream:
        return self.names.stream(name, bucket, usable)

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
            self.unqueue(record)
            self.lost(record)  # a look it was is not made
            was, record.kind, record.explored = record.kind, kind, False
            self.annotate(ts, self.placement_of(record), was)
            moved[ts.key] = "processing"
        if moved:
            scheduler.transitions(moved, stimulus_id=f"adaptyst-replace-{time.time()}")

    # ----- learning ---------------------------------------------------------------------

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        self.transitioned(key, start, finish, kwargs)
        if finish == "memory" and self.deferred:  # after its run was learnt from
            self.ready_after(key)

    def transitioned(self, key: Any, start: str, finish: str, kwargs: dict[str, Any]) -> None:
        """A placed call's run or failure, from the scheduler's own record of it: the run's
        measurement from the task-finished message of the worker that ran it (its
        metadata; a client cannot send one), the failure from the task erring there."""
        if start != "processing" and finish not in ("processing", "memory", "erred", "forgotten"):
            return  # every transition of every task comes here: the common case first
        if finish == "forgotten":
            self.deferred.discard(key)
            if (gone := self.placements.pop(key, None)) is not None and not gone.done:
                self.unqueue(gone)
                self.lost(gone)
            return
        record = self.placements.get(key)
        if record is None or record.done or record.name is None:
            return
        if finish == "processing":  # on a worker: its device's queue holds it
            self.deferred.discard(key)  # ready by a path ready_after did not see: as it was
            if not record.queued:
                self.pending[record.kind] = self.pending.get(record.kind, 0.0) + record.predicted_s
                record.queued = True
            return
        self.unqueue(record)  # off the worker, whatever comes next
        if start != "processing" or finish not in ("memory", "erred"):
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
            self.lost(record)
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
        stream.ran(record.kind, record.size, t, e)

    def failed(self, record: Placement, worker: Any) -> None:
        """A placed call that raised: the stream counts it, and an exploration's call is
        back."""
        named = self.names.get(record.name) if record.name is not None else None
        stream = named.streams.get(record.bucket) if named is not None else None
        if named is None or stream is None or record.kind not in named.learner.devices:
            return
        key = (record.bucket, record.kind, self.node_of(worker))
        named.figures.setdefault(key, [0, 0.0, 0.0, 0, 0])[4] += 1
        stream.failed(record.kind)

    def unqueue(self, record: Placement) -> None:
        """A call off its worker (back, failed, stolen, released): its time leaves its
        kind's queue."""
        if record.queued:
            record.queued = False
            self.pending[record.kind] = max(0.0, self.pending[record.kind] - record.predicted_s)

    def lost(self, record: Placement) -> None:
        """A call that will never come back from where it was placed: a look it was
        is not under way any more."""
        named = self.names.get(record.name) if record.name is not None else None
        if named is not None and record.explored:
            named.learner.back(record.name, record.kind)  # type: ignore[arg-type]

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
        names kept and forgotten; where the calls' sizes came from (report_rows.py)."""
        return report_of(self)
