"""What the advisor knows of one task's run: where it runs, what ran where and when,
and what its explorations cost; and the two questions about a device that those
answer (are its runs here stale, would its next run be cold)."""

from __future__ import annotations

from dataclasses import dataclass, field

from experiments.placement.baseline.model import Context


@dataclass
class TaskState:
    current: str = ""
    context: Context = (0, 0)
    size: int = 1
    executions: int = 0
    since_explore: int = 0
    streak: int = 0
    streak_target: str = ""
    # device -> (input context, executions count) of its last run of this task: data a
    # recent run (an exploration) left there needs no second transfer.
    ran: dict[str, tuple[Context, int]] = field(default_factory=dict)
    # input -> runs of the current device there that its explorations cost
    explore_spent: dict[Context, float] = field(default_factory=dict)
    explored_ctx: Context | None = None  # the input the last exploration was for
    exploring: str = ""  # the device of an exploration under way
    switch_in: str = ""  # the device of a recheck whose first run is still to come
    # (device, input) of an exploration run long after the device's last run of that
    # input (RELOOK_GROWTH): its first learned run may start the model over.
    relook: tuple[str, Context] | None = None
    # device -> (input context, executions count) when its model there last started over
    started_over: dict[str, tuple[Context, int]] = field(default_factory=dict)

    def stale(self, device: str) -> bool:
        """The device last ran this input before the current device's cost there moved
        (its model started over). A slow spell of the whole node (seen here: PoCL 0.25
        -> 0.4-0.7 ms and the CPU 0.5 -> 0.9-1.0 ms at once) made the current device
        look worse than the other's runs from 160 executions before, and the task moved
        to the CPU in the middle of the spell: the other device is measured again first."""
        ctx, at = self.started_over.get(self.current, ((-1, -1), -1))
        if ctx != self.context:
            return False
        ran_ctx, last = self.ran.get(device, ((-1, -1), -1))
        return ran_ctx != ctx or last < at

    def cold(self, device: str) -> bool:
        """The device's next run of the task would follow another device's runs, or be
        its first of this input: caches and the device's copy of the data are not warm."""
        return self.ran.get(device) != (self.context, self.executions)
