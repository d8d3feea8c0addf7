"""The advisor's tasks as a snapshot carries them: where each runs, what every device
is predicted, the device the models say and its gain, how settled the task is, and
each device's cost by input size (the points measured and the fitted curve)."""

from __future__ import annotations

import math

from adaptyst_top.snapshot import Curve, TaskEntry
from experiments.placement.baseline.advisor import MOVE_MIN_SAMPLES, Advisor
from experiments.placement.baseline.model import Prediction, bucket_size
from experiments.placement.baseline.task_state import TaskState


def task_entries(advisor: Advisor) -> tuple[TaskEntry, ...]:
    out = []
    for name, st in advisor.tasks.items():
        preds = advisor.predictions(name)
        best, gain, confidence = advisor.standing(name, preds)
        out.append(
            TaskEntry(
                task=name,
                device=st.current,
                executions=st.executions,
                input_bucket=st.context,
                predicted={
                    d: {
                        "time_s": p.time_s,
                        "energy_j": p.energy_j,
                        "samples": p.samples,
                        "source": p.source,
                    }
                    for d, p in preds.items()
                },
                pareto=tuple(advisor.pareto(name, preds)),
                best=best,
                gain=None if gain is None else round(gain, 4),
                confidence=None if confidence is None else round(confidence, 3),
                state=_state(advisor, st, preds, best, gain),
                size=st.size,
                curves=_curves(advisor, name, st.context[1]),
            )
        )
    return tuple(out)


def _state(
    advisor: Advisor, st: TaskState, preds: dict[str, Prediction], best: str, gain: float | None
) -> str:
    """What the task waits for, in a word: a row that reads `settled` beside a better
    device and no move said nothing of why (docs/placement.md, "States")."""
    if st.exploring or st.switch_in:
        return "exploring"  # a few runs on another device, to measure it
    if len(preds) < len(advisor.devices):
        return "learning"  # a device the task may run on has no cost for this input yet
    if not best or best == st.current or gain is None or gain <= 0:
        return "settled"
    there, here = preds[best], preds[st.current]
    if there.source != "measured" or there.samples < MOVE_MIN_SAMPLES or st.stale(best):
        return "untried"  # not run there enough: moves go where the input really ran
    if gain <= advisor.threshold_for(there, here):
        return "in noise"  # under the move threshold: taken for the node's noise
    if gain <= there.rel_err + here.rel_err:
        return "unsure"  # within the two devices' measured spread
    return "holding"  # a gain near the noise must hold for a few decisions first


def _curves(advisor: Advisor, task: str, feature: int) -> tuple[Curve, ...]:
    out = []
    for device in advisor.devices:
        m = advisor.models.get((task, device))
        if m is None:
            continue
        points = sorted(
            (m.sizes.get(ctx, bucket_size(ctx[0])), r.mean)
            for ctx, r in m.time.items()
            if ctx[1] == feature and r.n >= 1 and math.isfinite(r.mean)
        )
        fit = m.fit(feature)
        if fit is not None and not all(math.isfinite(x) for x in fit):
            fit = None
        if points:
            out.append(Curve(device, tuple(points), fit))
    return tuple(out)
