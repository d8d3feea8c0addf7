"""DevicePlacement: the advisor inside Dask's scheduler. As tasks are submitted
(update_graph, before any is scheduled) each placed task's call gets a device kind:
its stream's (placement/stream.py, the single-node advisor's model code) for the
input's size bucket; a kind other than the CPU becomes a resource restriction, so that
Dask itself picks, among the workers offering that device, the least busy and the one
holding the data. The workers report each run's time as an event (log_event), which
the advisor learns from; the next calls go where the runs say."""

from __future__ import annotations

import math
import time
from typing import Any, cast

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.dask.offer import OFFER_NAME, DeviceOffer
from adaptyst_top.dask.placed import ANNOTATION, KINDS, MAX_SIZE, TOPIC, VERSION, PlacedTask
from adaptyst_top.placement.advisor import Advisor, Objective
from adaptyst_top.placement.stream import TaskStream
from adaptyst_top.placement.task_keys import size_bucket

PLUGIN_NAME = "adaptyst-placement"
OBJECTIVES = ("time", "energy", "edp", "weighted")
MAX_RUN_S = 86_400.0  # a reported run longer than a day is no run of ours
MAX_RUN_J = 1e9  # nor one that drew more than a day of a 10 kW node


class DevicePlacement(SchedulerPlugin):
    """Register once per cluster: client.register_plugin(DevicePlacement("time"))."""

    name = PLUGIN_NAME

    def __init__(
        self, objective: str = "time", weight: float = 0.5, cpu_power_model: str | None = None
    ) -> None:
        """CPU_POWER_MODEL ("IDLE_W:MAX_W"): the workers' CPU power where they have no RAPL,
        for the energy objectives (as the monitor's --cpu-power-model)."""
        if objective not in OBJECTIVES:
            raise ValueError(
                f"DevicePlacement: objective {objective!r} is not one of {', '.join(OBJECTIVES)}"
            )
        if not (isinstance(weight, (int, float)) and 0.0 <= weight <= 1.0):
            raise ValueError(f"DevicePlacement: weight {weight!r} is not in [0, 1]")
        if cpu_power_model is not None:
            try:
                PowerModel.parse(cpu_power_model)
            except (ValueError, AttributeError) as exc:
                raise ValueError(f"DevicePlacement: {exc}") from None
        self.objective = cast(Objective, objective)
        self.weight = float(weight)
        self.cpu_power_model = cpu_power_model
        self.version = VERSION
        self._fresh()

    def _fresh(self) -> None:
        self.scheduler: Any = None
        self.advisors: dict[str, Advisor] = {}  # per task name: its models over sizes
        self.streams: dict[str, TaskStream] = {}  # per "name@size bucket"
        self.figures: dict[
            tuple[str, str, str], list[float]
        ] = {}  # stream, kind, node -> [runs, s, J, runs with J, failures]
        self.placed = 0
        self.place_ns = 0
        self.ignored = 0  # events that were not a run of ours (another version, damaged)
        self.energy_how: str | None = None  # how the workers measured the last joules

    # Only the settings travel to the scheduler; what it learns starts there.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "weight": self.weight,
            "cpu_power_model": self.cpu_power_model,
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
            ts = scheduler.tasks.get(key)
            spec = getattr(ts, "run_spec", None)
            func = getattr(spec, "func", None)
            if not isinstance(func, PlacedTask) or ANNOTATION in (ts.annotations or {}):
                continue
            start = time.perf_counter_ns()
            offered = self.offered() if offered is None else offered
            placement = self.place(ts, spec, func, offered)
            ts.annotations = {**(ts.annotations or {}), ANNOTATION: placement}
            kind = placement.get("kind")
            if kind and kind != "cpu":  # beside the user's own restrictions, not instead
                ts.resource_restrictions = {**(ts.resource_restrictions or {}), kind: 1}
            self.placed += 1
            self.place_ns += time.perf_counter_ns() - start

    def place(self, ts: Any, spec: Any, func: PlacedTask, offered: set[str]) -> dict[str, Any]:
        """The placement of one call: its kind, stream and size, or the error it raises."""
        if getattr(func, "version", None) != VERSION:
            return {
                "error": f"{func.name}: made by adaptyst-top's Dask API version "
                f"{getattr(func, 'version', '?')}, the scheduler's is {VERSION}: "
                "install the same adaptyst-top everywhere"
            }
        usable = [k for k in func.variants if k in offered]
        if not usable:
            return {
                "error": f"{func.name} has variants for {', '.join(sorted(func.variants))} "
                f"but the workers offer {', '.join(sorted(offered))}"
            }
        try:
            size = self.size_of(ts, spec, func)
        except Exception as e:  # the user's size function, run here on the arguments
            return {"error": f"{func.name}: size() failed: {type(e).__name__}: {e}"}
        stream = self.stream(func.name, size_bucket(size), usable)
        usable = [k for k in usable if k not in stream.dropped()] or usable
        kind, explored = stream.next_device()
        if kind not in usable:  # its workers left: the CPU, or what is there
            if explored:
                stream.trial_out = max(0, stream.trial_out - 1)  # that look is not made
            kind, explored = ("cpu" if "cpu" in usable else usable[0]), False
        return {
            "v": VERSION,
            "kind": kind,
            "stream": stream.task,
            "explored": explored,
            "size": size,
        }

    @staticmethod
    def size_of(ts: Any, spec: Any, func: PlacedTask) -> int:
        """The call's input size: SIZE of its arguments when they came with the graph; the
        bytes of its inputs when they are other tasks' results (only the workers hold
        those)."""
        if getattr(spec, "dependencies", None):
            nbytes = sum(max(0, int(getattr(d, "nbytes", 0) or 0)) for d in ts.dependencies)
            return max(1, nbytes)
        return func.input_size(
            *getattr(spec, "args", ()), **dict(getattr(spec, "kwargs", {}) or {})
        )

    def stream(self, name: str, bucket: int, usable: list[str]) -> TaskStream:
        advisor = self.advisors.get(name)
        if advisor is None:
            advisor = self.advisors[name] = Advisor(
                usable,
                objective=self.objective,
                weight=self.weight,  # type: ignore[arg-type]
            )
        for kind in usable:  # a kind a worker offers since
            if kind not in advisor.devices:
                advisor.devices.append(kind)
        sid = f"{name}@{bucket}"
        stream = self.streams.get(sid)
        if stream is None:
            start = "cpu" if "cpu" in usable else usable[0]
            stream = self.streams[sid] = TaskStream(advisor, sid, start)
        return stream

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        """Calls placed on a kind no worker offers any more would wait for one for ever
        (Dask's no-worker state): they run on the CPU, or a kind still there, instead.
        The streams and models stay: a worker offering the kind may come back."""
        offered = self.offered()
        moved = {}
        for ts in list(scheduler.unrunnable):
            placement = (ts.annotations or {}).get(ANNOTATION)
            func = getattr(ts.run_spec, "func", None)
            if not isinstance(placement, dict) or not isinstance(func, PlacedTask):
                continue
            if placement.get("kind") in offered:
                continue
            usable = [k for k in func.variants if k in offered]
            if not usable:
                continue  # nothing can run it: it waits for a worker, as any Dask task does
            kind = "cpu" if "cpu" in usable else usable[0]
            ts.annotations = {
                **ts.annotations,
                ANNOTATION: {**placement, "kind": kind, "explored": False},
            }
            rest = {k: n for k, n in (ts.resource_restrictions or {}).items() if k not in KINDS}
            ts.resource_restrictions = {**rest, kind: 1} if kind != "cpu" else rest
            moved[ts.key] = "processing"
        if moved:
            scheduler.transitions(moved, stimulus_id=f"adaptyst-replace-{time.time()}")

    # ----- learning ---------------------------------------------------------------------

    def log_event(self, topic: str, msg: Any) -> None:
        """A run reported by a worker. Anyone connected may log an event under any topic
        (Client.log_event): only a well-formed run, in range, of a kind its stream
        places, from a worker of this cluster, is learnt from; the rest is counted."""
        if topic != TOPIC:
            return
        try:
            sid, kind, t = msg["stream"], msg["kind"], float(msg["t"])
            size, explored = int(msg["size"]), bool(msg["explored"])
            e = msg.get("e")
            stream = self.streams.get(sid) if isinstance(sid, str) else None
            ws = self.scheduler.workers.get(msg.get("worker")) if self.scheduler else None
            ok = msg.get("v") == VERSION and stream is not None and ws is not None
            ok = ok and kind in stream.advisor.devices  # type: ignore[union-attr]
            ok = ok and math.isfinite(t) and 0 <= t <= MAX_RUN_S and 1 <= size <= MAX_SIZE
            if e is not None:
                e = float(e)
                ok = ok and math.isfinite(e) and 0 <= e <= MAX_RUN_J
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
            ok = False
        if not ok:
            self.ignored += 1
            return
        assert stream is not None and ws is not None
        fig = self.figures.setdefault((sid, kind, str(ws.host)), [0, 0.0, 0.0, 0, 0])
        fig[0] += 1
        fig[1] += t
        if e is not None:
            fig[2] += e
            fig[3] += 1
            self.energy_how = str(msg.get("how"))[:40]
        stream.ran(kind, (size_bucket(size), 0), t, e, size, explored)

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        """A placed call that raised, from the scheduler's own record (never from an
        event, which any client may send): the stream counts it, and an exploration's
        call is back."""
        if finish != "erred" or self.scheduler is None:
            return
        ts = self.scheduler.tasks.get(key)
        placement = (ts.annotations or {}).get(ANNOTATION) if ts is not None else None
        if not isinstance(placement, dict):
            return
        stream = self.streams.get(placement.get("stream"))  # type: ignore[arg-type]
        kind = placement.get("kind")
        if stream is None or kind not in stream.advisor.devices:
            return  # a call that never ran: no variant, a bad size
        worker = getattr(getattr(ts, "processing_on", None), "host", None) or "?"
        self.figures.setdefault((stream.task, kind, str(worker)), [0, 0.0, 0.0, 0, 0])[4] += 1
        stream.failed(kind, bool(placement.get("explored")))

    def node_of(self, address: str) -> str:
        ws = self.scheduler.workers.get(address) if self.scheduler is not None else None
        if ws is not None:
            return str(ws.host)
        return address.split("://")[-1].rsplit(":", 1)[0] or "?"

    # ----- report -----------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """Per task and input size: the device chosen, runs and mean time per device and
        node, moves and explorations, the gain over the CPU; and the placing's cost."""
        runs: dict[str, dict[str, int]] = {}
        secs: dict[str, dict[str, float]] = {}
        joules: dict[str, dict[str, list[float]]] = {}
        nodes: dict[str, dict[str, int]] = {}
        for (sid, kind, node), (n, total, j, nj, _) in self.figures.items():  # one pass
            add(runs.setdefault(sid, {}), kind, int(n))
            add(secs.setdefault(sid, {}), kind, total)
            if n:
                add(nodes.setdefault(sid, {}), node, int(n))
            js = joules.setdefault(sid, {}).setdefault(kind, [0.0, 0])
            js[0], js[1] = js[0] + j, js[1] + nj
        rows = []
        for sid, stream in sorted(self.streams.items()):
            mean_ms = {
                k: round(1e3 * t / runs[sid][k], 4)
                for k, t in secs.get(sid, {}).items()
                if runs[sid][k]
            }
            mean_mj = {k: round(1e3 * j / n, 4) for k, (j, n) in joules.get(sid, {}).items() if n}
            here = mean_ms.get(stream.assigned)
            gain = None
            if here is not None and "cpu" in mean_ms and mean_ms["cpu"] > 0:
                gain = round(1 - here / mean_ms["cpu"], 4)
            rows.append(
                {
                    "task": sid.rsplit("@", 1)[0],
                    "size_bucket": int(sid.rsplit("@", 1)[1]),
                    "device": stream.assigned,
                    "runs": runs.get(sid, {}),
                    "mean_ms": mean_ms,
                    "mean_mj": mean_mj,
                    "failed": dict(stream.failures),
                    "nodes": nodes.get(sid, {}),
                    "moves": stream.moves,
                    "explorations": stream.explorations,
                    "gain_vs_cpu": gain,
                    "predicted_ms": predicted_ms(stream),
                }
            )
        per_task = self.place_ns / self.placed / 1e3 if self.placed else None
        return {
            "version": VERSION,
            "objective": self.objective,
            "placed": self.placed,
            "place_us_per_task": None if per_task is None else round(per_task, 2),
            "ignored_events": self.ignored,
            "energy_method": self.energy_how,
            "tasks": rows,
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
