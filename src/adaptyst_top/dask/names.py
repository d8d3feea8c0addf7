"""The task names the Dask plugin places, each with its learner, its streams by size
bucket and its runs' figures; the least recently used forgotten beyond a cap, so that a
flood of names cannot grow the scheduler for ever."""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from adaptyst_top.placement.learned_stream import LearnedStream
from adaptyst_top.placement.learner import Learner
from adaptyst_top.placement.objectives import Objective

logger = logging.getLogger(__name__)


@dataclass
class Named:
    """One task name's state: its learner (one model over sizes per kind), its streams
    by size bucket, and its runs' figures by (bucket, kind, node): [runs, s, J, runs
    with J, failures]."""

    learner: Learner
    streams: dict[int, LearnedStream] = field(default_factory=dict)
    figures: dict[tuple[int, str, str], list[float]] = field(default_factory=dict)


class Names(OrderedDict[str, Named]):
    """Task name -> its state, the least recently used first."""

    def __init__(self, objective: Objective, weight: float, cap: int) -> None:
        super().__init__()
        self.objective: Objective = objective
        self.weight = weight
        self.cap = cap
        self.dropped = 0  # names forgotten

    def stream(self, name: str, bucket: int, usable: list[str]) -> LearnedStream:
        """NAME's stream for BUCKET (made, with the name's learner, if new): USABLE, the
        kinds the call may go to, join the learner's devices."""
        named = self.get(name)
        if named is None:
            kinds = sorted(usable, key=lambda k: k != "cpu")  # the CPU first: the reference
            learner = Learner(kinds, objective=self.objective, weight=self.weight)
            named = self[name] = Named(learner)
            self.forget_beyond_cap()
        else:
            self.move_to_end(name)
        for kind in usable:  # a kind a worker offers since
            if kind not in named.learner.devices:
                named.learner.devices.append(kind)
        stream = named.streams.get(bucket)
        if stream is None:
            start = "cpu" if "cpu" in usable else usable[0]
            stream = named.streams[bucket] = LearnedStream(named.learner, name, bucket, start)
        return stream

    def forget_beyond_cap(self) -> None:
        """Drop the least recently used names beyond the cap: their models, streams and
        figures go; their calls still running come back to nothing and are not learnt."""
        while len(self) > self.cap:
            self.popitem(last=False)
            if self.dropped == 0:
                logger.warning(
                    "DevicePlacement: more than %d task names; the least recently used are "
                    "forgotten (placement_report: names.dropped)",
                    self.cap,
                )
            self.dropped += 1
