"""The probe-kind seam: each kind says in one place how its specs parse, plan, cost,
calibrate and show; the rest of the tool asks it."""

from __future__ import annotations

from typing import get_args

import pytest

from adaptyst_top.collectors.probes.cost.table import DEFAULT_COSTS
from adaptyst_top.collectors.probes.kinds import (
    KINDS,
    KINDS_HELP,
    SPEC_PREFIXES,
    SYNTAX,
    calibration_cases,
    kind_of,
    parse_spec,
)
from adaptyst_top.collectors.probes.spec import ProbeSpecError
from adaptyst_top.snapshot.probes import ProbeKind


def test_the_snapshot_vocabulary_is_the_kinds() -> None:
    assert set(get_args(ProbeKind)) == set(KINDS)
    for name, kind in KINDS.items():
        assert kind.name == name
        assert f"{name}:" in SPEC_PREFIXES
        assert kind.syntax in SYNTAX and kind.what in KINDS_HELP


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))
def test_each_kinds_calibration_parses_to_that_kind_and_a_known_class(kind: object) -> None:
    from adaptyst_top.collectors.probes.kinds.base import ProbeKindDef

    assert isinstance(kind, ProbeKindDef)
    for case in kind.calibration:
        spec = parse_spec(case.spec.format(bin="/usr/bin/true"))
        assert kind_of(spec) is kind
        assert case.cost_class in DEFAULT_COSTS and case.calls > 0
    assert {c.cost_class for c in calibration_cases()} >= {c.cost_class for c in kind.calibration}


@pytest.mark.parametrize(
    ("text", "label", "latency"),
    [
        ("uprobe:c:malloc", "malloc", True),
        ("u:c:mem*@arg2:int", "mem*", True),
        ('uprobe:/x:"ns::f(int, char)"', "ns::f(int, char)", True),
        ("usdt:/x:prov:hit", "prov:hit", False),
        ("usdt:/x:prov:begin..end@arg1:str", "prov:begin..end", True),
    ],
)
def test_the_kind_that_parses_a_spec_names_its_rows(text: str, label: str, latency: bool) -> None:
    spec = parse_spec(text)
    assert (spec.label, spec.measures_latency) == (label, latency)
    shown = kind_of(spec).shown_name(spec.label)
    assert shown == (label.split(":", 1)[1] if spec.kind == "usdt" else label)


def test_a_word_no_kind_owns_is_refused_naming_every_kind() -> None:
    with pytest.raises(ProbeSpecError) as err:
        parse_spec("kprobe:vfs_read")
    for name in KINDS:
        assert name in err.value.reason


def test_a_key_suffix_follows_its_kinds_rules() -> None:
    assert parse_spec("uprobe:c:memcpy@GLIBC_2.14").func == "memcpy@GLIBC_2.14"
    assert parse_spec("uprobe:c:strlen@retval").retval
    with pytest.raises(ProbeSpecError, match="no @retval"):
        parse_spec("usdt:/x:p:n@retval")
    with pytest.raises(ProbeSpecError, match=r"1\.\.6"):
        parse_spec("uprobe:c:f@arg7")
    assert parse_spec("usdt:/x:p:n@arg12").arg == 12


def test_each_cost_class_is_declared_by_one_kind_with_its_default() -> None:
    """A kind's cost classes live on the kind: every class it calibrates or puts its rows
    in is one it declares, with a default figure, and no two kinds declare the same; a
    kind whose rows are another's (mpi:'s are uprobes) declares none of its own."""
    from adaptyst_top.collectors.probes.cost.table import DEFAULT_COSTS, CostTable
    from adaptyst_top.collectors.probes.kinds import KINDS
    from adaptyst_top.collectors.probes.kinds.device_layer import DeviceLayerKind

    declared = [c for k in KINDS.values() for c in k.cost_classes]
    assert len(declared) == len(set(declared)) == len(DEFAULT_COSTS)
    for kind in KINDS.values():
        rows_of = next(k for k in KINDS.values() if isinstance(kind, type(k)) and k.cost_classes)
        assert kind.cost_classes or rows_of is not kind, kind.name
        assert {c.cost_class for c in kind.calibration} <= set(kind.cost_classes), kind.name
        if isinstance(kind, DeviceLayerKind):
            assert {kind.timed_class, kind.counted_class} <= set(kind.cost_classes)
        for name, cost in kind.cost_classes.items():
            assert cost.source == "default" and cost.per_hit_ns > 0 <= cost.in_interval_ns
            assert CostTable().get(name) is cost
