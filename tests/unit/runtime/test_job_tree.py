"""How a job's view reaches its nodes: directly up to the fan-out, past it through as
few relays as hold them, each group contiguous and as even as can be."""

from __future__ import annotations

import pytest

from adaptyst_top.runtime.job_tree import FANOUT_RANGE, Reach, TreeError, node_name, plan


def test_up_to_the_fanout_each_node_is_a_link_of_its_own() -> None:
    assert plan(["a", "b"], 2) == [Reach("a"), Reach("b")]
    assert plan([], 32) == []


@pytest.mark.parametrize("count,fanout", [(3, 2), (4, 2), (33, 32), (1000, 32), (1024, 32)])
def test_past_it_relays_hold_every_node_once_in_order(count: int, fanout: int) -> None:
    nodes = [f"n{i:04d}" for i in range(count)]
    links = plan(nodes, fanout)
    assert len(links) <= fanout
    assert [n for r in links for n in r.nodes] == nodes  # each once, Slurm's order kept
    sizes = [len(r.nodes) for r in links]
    assert max(sizes) <= fanout and max(sizes) - min(sizes) <= 1
    assert all(r.head == r.nodes[0] for r in links)
    assert all(bool(r.members) == (len(r.nodes) > 1) for r in links)  # one alone: direct


def test_a_job_past_the_fanout_squared_and_a_fanout_out_of_range_are_refused() -> None:
    with pytest.raises(TreeError, match="at most 1024"):
        plan([f"n{i}" for i in range(1025)], 32)
    with pytest.raises(TreeError, match=f"{FANOUT_RANGE[0]}..{FANOUT_RANGE[1]}"):
        plan(["a"], 1)


@pytest.mark.parametrize("bad", ["-oProxyCommand=x", "a b", "", "n1\n", "a;b", "x" * 300])
def test_what_could_be_taken_for_an_option_or_a_word_is_no_node(bad: str) -> None:
    with pytest.raises(TreeError):
        node_name(bad)
    assert node_name("node-12.rack3") == "node-12.rack3"
