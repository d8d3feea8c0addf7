"""How a job's view reaches its nodes: one ssh link a node up to FANOUT nodes; past that,
a tree of two levels, each link reaching a relay on its group's first node
(`adaptyst-top bridge --job ID --nodes A,B,...`, the user's own process there) that
opens its group's nodes and sends their snapshot merged. The login node then holds
at most FANOUT links, and so does each relay: FANOUT² nodes in all. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from adaptyst_top.system.slurm_jobs import is_node_name

DEFAULT_FANOUT = 32  # links one process holds (its CPU per link: bench/README.md)
FANOUT_RANGE = (2, 256)


class TreeError(ValueError):
    """A job that one view cannot reach, in one line."""


@dataclass(frozen=True)
class Reach:
    """One link: to HEAD's agent (MEMBERS empty), or to a relay on HEAD for MEMBERS."""

    head: str
    members: tuple[str, ...] = ()

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.members or (self.head,)


def node_name(text: str) -> str:
    """TEXT, a node's name; TreeError where it could be taken for anything else."""
    if not is_node_name(text):
        raise TreeError(f"not a node name: {text[:80]!r}")
    return text


def plan(nodes: Sequence[str], fanout: int = DEFAULT_FANOUT) -> list[Reach]:
    """The links to NODES (in Slurm's order, where neighbours share a rack): one a
    node, or, past FANOUT, as few relays as hold them, their groups as even as can be."""
    lo, hi = FANOUT_RANGE
    if not lo <= fanout <= hi:
        raise TreeError(f"a fan-out is {lo}..{hi} links, not {fanout}")
    if len(nodes) <= fanout:
        return [Reach(n) for n in nodes]
    groups = math.ceil(len(nodes) / fanout)
    if groups > fanout:
        raise TreeError(
            f"the job runs on {len(nodes)} nodes; a view of fan-out {fanout} reaches at most "
            f"{fanout * fanout}: raise --fanout, watch a few with --host NODE, or all with "
            "the cluster view (docs/mpi.md)"
        )
    size, extra = divmod(len(nodes), groups)
    out, start = [], 0
    for g in range(groups):
        chunk = tuple(nodes[start : start + size + (g < extra)])
        start += len(chunk)
        out.append(Reach(chunk[0]) if len(chunk) == 1 else Reach(chunk[0], chunk))
    return out
