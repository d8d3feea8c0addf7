"""A user's workers started as her connection says hello, not at her first request: a
fresh user's first probe waited for her opener's interpreter to start, then her
parser's, one after the other (py-spy on the agent: ~45 and ~95 ms of a ~190 ms open)."""

from __future__ import annotations

from adaptyst_top.agent.core import opener, parser
from adaptyst_top.agent.core.authorization import Peer


def warm_workers(peer: Peer) -> None:
    """PEER's opener and parser, unless kept already (root's files are its own: none)."""
    if peer.privileged:
        return
    groups = sorted(peer.groups)
    opener.warm(peer.uid, peer.gid, groups)
    parser.warm(peer.uid, peer.gid, groups)
