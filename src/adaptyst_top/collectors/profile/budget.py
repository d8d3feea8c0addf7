"""The profile's cost against the budget, and the rate it lowers to.

In the target, a sample costs its program's run (`sample_ns`) and each switch-out of a
profiled thread the switch program's (`switch_ns`); the target's CPU time over the
interval is what its samples stand for (one 1/HZ each), so the share needs no other
reading. In the tool, the unwinding's CPU. Over the budget (the probes' own, a share
of the target's CPU), or past MAX_TOOL_SHARE of a core, the rate is halved, down to
MIN_HZ; the rate asked is kept beside it, and the profile says why."""

from __future__ import annotations

from dataclasses import dataclass

from adaptyst_top.collectors.probes.budget import budget_text, share_text

MIN_HZ = 10  # the rate is never lowered below this: a profile still, if a coarse one
MAX_TOOL_SHARE = 0.25  # of a core: what the tool's unwinding may take before it lowers
MIN_SAMPLES = 10  # an interval with fewer says nothing of the target's CPU time


@dataclass
class Reading:
    t: float  # time.monotonic()
    samples: int  # on-CPU events so far
    switches: int  # switch-outs of profiled threads so far
    cpu_s: float  # the unwinding's CPU so far


class ProfileBudget:
    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.share: float | None = None  # of the target's CPU, the last measured
        self.tool_share: float | None = None  # of a core, the last measured
        self.said = ""  # why the rate was last lowered
        self._last: Reading | None = None

    def update(
        self, now: Reading, hz: int, sample_ns: float | None, switch_ns: float | None
    ) -> int | None:
        """The rate to lower to after the interval that ends with NOW (None: keep HZ)."""
        last, self._last = self._last, now
        if last is None or now.t <= last.t:
            return None
        self.tool_share = max(0.0, now.cpu_s - last.cpu_s) / (now.t - last.t)
        samples = now.samples - last.samples
        if samples >= MIN_SAMPLES and sample_ns is not None:
            kernel_ns = samples * sample_ns + (now.switches - last.switches) * (switch_ns or 0.0)
            self.share = kernel_ns / (samples * 1e9 / hz)
        over = []
        if self.share is not None and self.share > self.budget:
            over.append(
                f"it cost {share_text(self.share)} of the target's CPU (budget {budget_text(self.budget)})"
            )
        if self.tool_share > MAX_TOOL_SHARE:
            over.append(f"unwinding took {self.tool_share:.0%} of a core")
        if not over or hz <= MIN_HZ:
            return None
        lower = max(MIN_HZ, hz // 2)
        self.said = f"profile rate lowered to {lower} Hz: {' and '.join(over)}"
        self.share = None  # measured again at the new rate
        return lower
