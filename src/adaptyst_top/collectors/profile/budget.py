"""The profile's cost against the budget, and the rate it lowers to.

In the target, a sample costs its program's run (`sample_ns`) and each switch-out of a
profiled thread the switch program's (`switch_ns`); the target's CPU time over the
interval is what its samples stand for (one 1/HZ each), so the share needs no other
reading. In the tool, the unwinding's CPU. When the samples alone cost more than the
budget (the probes' own, a share of the target's CPU), or the unwinding more than
MAX_TOOL_SHARE of a core, the rate is halved, down to MIN_HZ; the rate asked is kept
beside it, and the profile says why. Switch-outs cost the same at any rate: over the
budget by them, the profile says so and keeps its rate."""

from __future__ import annotations

from dataclasses import dataclass

from adaptyst_top.collectors.probes.cost.budget import budget_text, share_text

MIN_HZ = 10  # the rate is never lowered below this: a profile still, if a coarse one
MAX_TOOL_SHARE = 0.25  # of a core: what the tool's unwinding may take before it lowers
MIN_SAMPLES = 10  # an interval with fewer says nothing of the target's CPU time
# The unwinding's share is judged over this long: its first looks at a run's libraries
# (libc's tables and symbols: 0.1-1 s of CPU, more beside other work) are a start-up
# burst, not a rate to lower.
TOOL_WINDOW_S = 10.0


@dataclass
class Reading:
    t: float  # time.monotonic()
    samples: int  # on-CPU events so far
    switches: int  # switch-outs of profiled threads so far
    cpu_s: float  # the unwinding's CPU so far


class ProfileBudget:
    @property
    def said(self) -> str:
        """What the profile says of its cost, in one line ("": nothing to say)."""
        return "; ".join(t for t in (self.lowered, self.switches_over) if t)

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.share: float | None = None  # of the target's CPU, the last measured
        self.tool_share: float | None = None  # of a core, the last measured
        self.lowered = ""  # why the rate was last lowered
        self.switches_over = ""  # that the switch-outs alone are over the budget
        self._last: Reading | None = None
        self._window: list[Reading] = []  # the readings of the last TOOL_WINDOW_S

    def update(
        self, now: Reading, hz: int, sample_ns: float | None, switch_ns: float | None
    ) -> int | None:
        """The rate to lower to after the interval that ends with NOW (None: keep HZ)."""
        last, self._last = self._last, now
        if last is None or now.t <= last.t:
            self._window = [now]
            return None
        self._window.append(now)
        while len(self._window) > 2 and now.t - self._window[1].t >= TOOL_WINDOW_S:
            self._window.pop(0)
        first = self._window[0]
        self.tool_share = max(0.0, now.cpu_s - first.cpu_s) / (now.t - first.t)
        tool_over = now.t - first.t >= TOOL_WINDOW_S and self.tool_share > MAX_TOOL_SHARE
        samples = now.samples - last.samples
        sampled = None
        if samples >= MIN_SAMPLES and sample_ns is not None:
            cpu_ns = samples * 1e9 / hz
            sampled = samples * sample_ns / cpu_ns
            switched = (now.switches - last.switches) * (switch_ns or 0.0) / cpu_ns
            self.share = sampled + switched
            self.switches_over = ""
            if sampled <= self.budget < self.share:
                # A thread's switch-outs cost the same at any rate: said, not lowered.
                self.switches_over = (
                    f"the profile costs {share_text(self.share)} of the target's CPU "
                    f"(budget {budget_text(self.budget)}), {share_text(switched)} in its "
                    "switches, which a lower rate would not change"
                )
        over = []
        if sampled is not None and sampled > self.budget:
            over.append(
                f"its samples cost {share_text(sampled)} of the target's CPU "
                f"(budget {budget_text(self.budget)})"
            )
        if tool_over:
            over.append(f"unwinding took {self.tool_share:.0%} of a core")
        if not over or hz <= MIN_HZ:
            return None
        lower = max(MIN_HZ, hz // 2)
        self.lowered = f"profile rate lowered to {lower} Hz: {' and '.join(over)}"
        self.share = None  # measured again at the new rate
        self._window = [now]
        return lower
