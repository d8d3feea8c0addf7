"""Planning a uprobe spec, without root: on the test targets' ELF files and libc."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.engine.attach_plan import PlanError, plan_uprobes, plan_usdt
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.safety import entry_safety as es
from adaptyst_top.system.targets import resolve_target
from tests.support.paths import TARGETS
from tests.support.workload import build_c

SAFE = es.EntryPolicy({c: es.Verdict("verified", "test") for c in es.CHECKS})
EVEX_FAILED = es.EntryPolicy(
    {**SAFE.verdicts, es.EVEX: es.Verdict("failed", "probed results differed")}
)


def plan(spec: str, path: str, policy: es.EntryPolicy = SAFE, room: int = 1000):  # type: ignore[no-untyped-def]
    return plan_uprobes(parse_spec(spec), path, read_elf(path), policy.refusal, room)


def test_a_glob_plans_each_function_once_with_its_cost_class(workload_bin: Path) -> None:
    planned = {p.name: p for p in plan(f"uprobe:{workload_bin}:*_fn", str(workload_bin))}
    assert {"fast_fn", "leaf_fn", "held_fn"} <= set(planned)
    assert all(p.sym == p.name and p.addr == 0 and p.refused is None for p in planned.values())
    assert {p.cost_class for p in planned.values()} <= {ov.EMULATED, ov.SINGLESTEP}


def test_nothing_matched_and_too_many_are_one_line(workload_bin: Path) -> None:
    with pytest.raises(PlanError, match="0 functions matched 'nope_\\*'"):
        plan(f"uprobe:{workload_bin}:nope_*", str(workload_bin))
    with pytest.raises(PlanError, match="more than the limit of 1 more attach points"):
        plan(f"uprobe:{workload_bin}:*_fn", str(workload_bin), room=1)


def test_an_ifunc_is_planned_at_its_implementation() -> None:
    libc = resolve_target("c")
    (strlen,) = plan("uprobe:c:strlen", libc)
    resolver = next(f.address for f in read_elf(libc).functions if f.name == "strlen")
    assert strlen.sym == "" and strlen.addr not in (0, resolver)


@pytest.mark.skipif(
    not {"avx512f", "avx512vl", "avx512bw"} <= es.cpu_flags(), reason="glibc picks EVEX only here"
)
def test_refused_functions_say_why_and_all_refused_is_an_error() -> None:
    libc = resolve_target("c")
    planned = {p.name: p for p in plan("uprobe:c:strc*", libc, EVEX_FAILED)}
    assert planned["strchr"].refused and "vpbroadcastb" in planned["strchr"].refused
    assert planned["strcmp"].refused is None or "EVEX" in planned["strcmp"].refused
    with pytest.raises(PlanError, match="refused strchr"):
        plan("uprobe:c:strchr", libc, EVEX_FAILED)
    assert plan("uprobe:c:strchr", libc, SAFE)[0].refused is None  # verified: allowed


def usdt(spec: str, path: Path, room: int = 1000):  # type: ignore[no-untyped-def]
    return plan_usdt(parse_spec(spec), str(path), read_elf(str(path)), room)


def test_a_usdt_pair_split_by_an_argument_is_planned(workload_bin: Path) -> None:
    p = usdt(f"usdt:{workload_bin}:adaptyst_test:task_begin..task_end@arg1", workload_bin)
    assert p.names == ["task_begin", "task_end"] and p.cost_class == ov.USDT_PAIR
    assert [(s.role, s.chain, s.arg) for s in p.slots] == [
        ("usdt-begin", 1, 1),
        ("usdt-end", 1, None),
    ]
    assert all(p.sites[n] for n in p.names) and p.ref_ctrs == {}
    count = usdt(f"usdt:{workload_bin}:adaptyst_test:tick", workload_bin)
    assert count.cost_class == ov.USDT and [s.role for s in count.slots] == ["usdt-count"]


def test_a_gated_probe_is_planned_with_its_semaphore_offset(tmp_path: Path) -> None:
    binary = build_c(TARGETS / "gated.c", tmp_path)
    p = usdt(f"usdt:{binary}:adaptyst_gated:tick", binary)
    elf = read_elf(str(binary))
    (site,) = p.sites["tick"]
    assert site.semaphore and p.ref_ctrs == {"tick": elf.offset_of(site.semaphore)}


def test_usdt_mistakes_are_one_line(workload_bin: Path) -> None:
    with pytest.raises(
        PlanError, match=r"adaptyst_test:nope not found in .*\(it has: adaptyst_test:"
    ):
        usdt(f"usdt:{workload_bin}:adaptyst_test:nope", workload_bin)
    with pytest.raises(PlanError, match="has 2 arguments: there is no @arg5"):
        usdt(f"usdt:{workload_bin}:adaptyst_test:task_begin@arg5", workload_bin)
    with pytest.raises(PlanError, match="more than the limit"):
        usdt(f"usdt:{workload_bin}:adaptyst_test:tick", workload_bin, room=0)
