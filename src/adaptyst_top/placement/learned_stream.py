"""One task name's calls in one size bucket, as the Dask plugin places them with the
learner (learner.py; one learner per name shares what each size taught): what a report
shows of the bucket (where it runs now, its moves, looks and failures), and the devices
left out after failing (failing.py)."""

from __future__ import annotations

from adaptyst_top.placement.failing import Failing
from adaptyst_top.placement.learner import Estimate, Learner


class LearnedStream:
    def __init__(self, learner: Learner, name: str, bucket: int, start: str) -> None:
        self.learner = learner
        self.name = name
        self.task = f"{name}@{bucket}"  # the stream's id in reports and placements
        # Where its calls go once the looks are done: what the name's other sizes say.
        self.assigned = learner.best(name, 1 << bucket) or start
        self.size = 1  # its last call's input size: what its predictions are for
        self.moves = 0
        self.explorations = 0
        self.calls = 0  # calls back, run or failed
        self.failing = Failing()
        self.failures = self.failing.counts

    def dropped(self) -> set[str]:
        return self.failing.dropped(self.calls)

    def placed(self, device: str, size: int, look: bool) -> None:
        """A call placed on DEVICE; LOOK: the learner placed it there to see."""
        self.size = size
        self.explorations += look

    def ran(self, device: str, size: int, time_s: float, energy_j: float | None) -> None:
        self.learner.observe(self.name, device, size, time_s, energy_j)
        self.failing.ran(device)
        self.calls += 1
        best = self.learner.best(self.name, size)
        if best is not None and best != self.assigned:
            self.assigned = best
            self.moves += 1

    def failed(self, device: str) -> None:
        """A call raised: nothing learnt of its time; the device may be left out."""
        self.failing.failed(device, self.calls)
        self.learner.failed(self.name, device)
        self.calls += 1

    def predicted_ms(self) -> dict[str, float]:
        """What the learner says a call of the bucket's input costs on each device."""
        return {d: round(1e3 * e.time_s, 4) for d, e in self._estimates().items()}

    def predicted_factor(self) -> dict[str, float]:
        """How far either way one sigma of that prediction reaches (x1.05: within 5%)."""
        return {d: round(e.time_factor, 3) for d, e in self._estimates().items()}

    def _estimates(self) -> dict[str, Estimate]:
        out = {}
        for d in self.learner.devices:
            if (est := self.learner.estimate(self.name, d, self.size)) is not None:
                out[d] = est
        return out
