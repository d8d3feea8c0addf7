"""The advisor inside the monitor: each snapshot's task probe rows become observations
(count and time deltas per task, device and input bucket, from the kernel's
statistics), device power becomes per-task energy, and the advice goes into the
snapshot; in auto mode, and when applied, it is pushed over the control channel."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from adaptyst_top.placement.advisor import Advice, Advisor
from adaptyst_top.placement.control import ControlServer
from adaptyst_top.placement.task_keys import parse_key

TASK_PROBE_NAME = "adaptyst:task_begin..task_end"
FEW_RUNS = 8


@dataclass
class _Seen:
    count: int = 0
    total_ns: float = 0.0


class PlacementLoop:
    def __init__(
        self, advisor: Advisor, control: ControlServer | None = None, mode: str = "suggest"
    ) -> None:
        self.advisor = advisor
        self.control = control
        self.mode = mode
        self.seen: dict[str, _Seen] = {}
        self.advice: dict[str, Advice] = {}
        self.moves: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def set_mode(self, mode: str) -> None:
        self.mode = "auto" if mode == "auto" else "suggest"

    def _power_of(
        self, device: str, devices: list[dict[str, Any]]
    ) -> tuple[float | None, str | None]:
        by_id = {d.get("id"): d for d in devices}
        d = by_id.get(device)
        if d is not None and d.get("kind") == "opencl":
            d = by_id.get(d.get("extra", {}).get("maps_to")) or d
        if d is None:
            return None, None
        return d.get("power_w"), d.get("energy_source")

    def update(self, snap: dict[str, Any]) -> None:
        """Learn from one snapshot and put tasks, advice and the advisor's state into it."""
        with self._lock:
            ran: dict[str, dict[str, int]] = {}
            for p in snap.get("probes", []):
                if p.get("name") != TASK_PROBE_NAME or not isinstance(p.get("key"), str):
                    continue
                parsed = parse_key(p["key"])
                if parsed is None or p.get("mean_ns") is None:
                    continue
                task, device, sb, fb = parsed
                count = int(p.get("count") or 0)
                total = float(p["mean_ns"]) * count
                prev = self.seen.setdefault(p["key"], _Seen())
                dn, dt = count - prev.count, total - prev.total_ns
                prev.count, prev.total_ns = count, total
                if dn <= 0 or dt <= 0:
                    continue
                mean_s = dt / dn / 1e9
                if dn < FEW_RUNS and p.get("p50_ns"):
                    # A few runs (an exploration) include the data's first upload to
                    # that device: their median says more about the steady cost.
                    mean_s = float(p["p50_ns"]) / 1e9
                power, _source = self._power_of(device, snap.get("devices", []))
                energy = None if power is None else power * mean_s
                self.advisor.observe(task, device, (sb, fb), mean_s, dn, energy, size=2**sb)
                ran.setdefault(task, {}).setdefault(device, 0)
                ran[task][device] += dn
            for task, counts in ran.items():
                self.advisor.set_current(task, max(counts, key=lambda d: counts[d]))
            self.advice = {}
            for task in list(self.advisor.tasks):
                a = self.advisor.decide(task)
                if a is None:
                    continue
                if self.mode == "auto":
                    self._apply(a)
                else:
                    self.advice[task] = a
            snap["advice"] = [a.to_json() for a in self.advice.values()]
            snap["tasks"] = self._tasks()
            clients = len(self.control.clients) if self.control else 0
            snap["advisor"] = {
                "state": "learning" if not snap["tasks"] else "running",
                "mode": self.mode,
                "objective": self.advisor.objective,
                "detail": f"{len(snap['tasks'])} tasks, {clients} application(s) connected",
                "moves": self.moves[-20:],
            }

    def _tasks(self) -> list[dict[str, Any]]:
        out = []
        for name, st in self.advisor.tasks.items():
            preds = self.advisor.predictions(name)
            out.append(
                {
                    "task": name,
                    "device": st.current,
                    "executions": st.executions,
                    "input_bucket": list(st.context),
                    "predicted": {
                        d: {"time_s": p.time_s, "energy_j": p.energy_j, "samples": p.samples}
                        for d, p in preds.items()
                    },
                    "pareto": [list(x) for x in self.advisor.pareto(name)],
                }
            )
        return out

    def _apply(self, a: Advice) -> int:
        sent = self.control.push(a.task, a.suggested, a.why, a.runs) if self.control else 0
        self.advisor.accepted(a)
        self.moves.append(
            {
                "task": a.task,
                "from": a.current,
                "to": a.suggested,
                "explore": a.explore,
                "sent": sent,
            }
        )
        return sent

    def apply(self, task: str) -> int:
        """Apply the current advice for a task (the TUI's `m`); how many apps were told."""
        with self._lock:
            a = self.advice.pop(task, None)
            if a is None:
                raise LookupError(f"no advice for {task}")
            return self._apply(a)

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
