"""One task's calls as the advisor places them, when the caller asks where each call
runs (the placement eval, the Dask scheduler plugin) instead of a monitor watching an
application that asks the task API: the device of the next call, and what a finished
call teaches. The monitor decides once per interval; here once per DECIDE_EVERY
finished calls, and as soon as an exploration's calls are all back."""

from __future__ import annotations

from adaptyst_top.placement.advice import Advice
from adaptyst_top.placement.failing import DROPPED_FOR as DROPPED_FOR
from adaptyst_top.placement.failing import FAILS_TO_DROP as FAILS_TO_DROP
from adaptyst_top.placement.failing import Failing
from experiments.placement.baseline.advisor import EXPLORE_RUNS, Advisor
from experiments.placement.baseline.model import Context

DECIDE_EVERY = 5  # finished calls per decision: a monitor's interval of a busy task


class TaskStream:
    def __init__(self, advisor: Advisor, task: str, start: str) -> None:
        self.advisor = advisor
        self.task = task
        self.assigned = start
        self.trial: tuple[str, int] | None = None  # an exploration: device, calls to send
        self.trial_out = 0  # the exploration's calls sent and not back yet
        self.window: dict[str, int] = {}
        self.moves = 0  # real moves (explorations apart)
        self.explorations = 0
        self.failing = Failing()
        self.failures = self.failing.counts  # device -> its calls that failed, in all
        self.calls = 0

    def next_device(self) -> tuple[str, bool]:
        """Where the next call runs, and whether it is an exploration's."""
        if self.trial is not None:
            dev, left = self.trial
            self.trial = (dev, left - 1) if left > 1 else None
            self.trial_out += 1
            return dev, True
        return self.assigned, False

    def ran(
        self,
        device: str,
        ctx: Context,
        time_s: float,
        energy_j: float | None = None,
        size: int | None = None,
        explored: bool = False,
    ) -> Advice | None:
        """A call came back: learn from it; the advice taken, when a decision was due."""
        self.advisor.observe(self.task, device, ctx, time_s, 1, energy_j, size=size)
        self.failing.ran(device)
        return self._back(device, explored)

    def failed(self, device: str, explored: bool) -> Advice | None:
        """A call raised: nothing to learn of its time, but the call is back."""
        self.failing.failed(device, self.calls)
        if device in self.dropped() and self.trial is not None and self.trial[0] == device:
            self.trial = None  # the rest of that look would fail as well
        return self._back(device, explored)

    def dropped(self) -> set[str]:
        """Devices left out after failing (failing.py): the caller leaves them out, as a
        device no worker offers."""
        return self.failing.dropped(self.calls)

    def _back(self, device: str, explored: bool) -> Advice | None:
        self.calls += 1
        self.window[device] = self.window.get(device, 0) + 1
        if explored:
            self.trial_out = max(0, self.trial_out - 1)
        if sum(self.window.values()) >= DECIDE_EVERY:
            self.advisor.set_current(self.task, max(self.window, key=lambda d: self.window[d]))
            self.window = {}
            return self._decide()
        if explored and self.trial is None and self.trial_out == 0:
            return self._decide()  # the exploration is all back: the monitor's next interval
        return None

    def _decide(self) -> Advice | None:
        advice = self.advisor.decide(self.task)
        if advice is None or advice.suggested in self.dropped():
            return None
        self.advisor.accepted(advice)
        if advice.explore:
            self.trial = (advice.suggested, advice.runs or EXPLORE_RUNS)
            self.trial_out = 0
            self.explorations += 1
        else:
            self.assigned = advice.suggested
            self.moves += 1
        return advice
