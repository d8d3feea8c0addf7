"""The opencl kind on the seam: its specs, the names its entries show, what a launched
command gets in its environment, and the program that files a device's own time."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.probes.bpf.module_object import LOC_REG, core_plan
from adaptyst_top.collectors.probes.bpf.program import UNTIMED, Slot
from adaptyst_top.collectors.probes.elf.usdt_args import parse_arg
from adaptyst_top.collectors.probes.kinds import kind_of, parse_spec
from adaptyst_top.collectors.probes.kinds.opencl import BUDGET_ENV, LAYERS_ENV, SITE, layer_path
from adaptyst_top.collectors.probes.spec import ProbeSpecError


def test_a_spec_names_the_layers_site_split_by_kernel_name() -> None:
    layer = layer_path()
    assert layer is not None, "the install builds the layer (opencl-c-headers)"
    spec = parse_spec("opencl:mat*")
    assert (spec.kind, spec.target, spec.name, spec.func) == ("opencl", layer, SITE, "mat*")
    assert (spec.label, spec.measures_latency, spec.arg, spec.arg_type) == (
        "opencl:mat*",
        True,
        1,
        "str",
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("opencl:", "kernel name or glob"),
        ("opencl:a b", "kernel name or glob"),
        ("opencl:x;rm", "kernel name or glob"),
        ("opencl:x@arg1", "split by kernel name"),
        ("opencl:x@retval", "no @retval"),
    ],
)
def test_a_malformed_spec_is_one_line(text: str, says: str) -> None:
    with pytest.raises(ProbeSpecError, match=says) as err:
        parse_spec(text)
    assert "\n" not in err.value.one_line


def test_entries_are_the_kernels_the_glob_names() -> None:
    spec = parse_spec("opencl:s*")
    kind = kind_of(spec)
    assert kind.entry_name(spec, spec.label, "scale") == "scale"
    assert kind.entry_name(spec, spec.label, "tiny") is None
    assert kind.entry_name(spec, spec.label, None) == "opencl:s*"  # nothing launched yet
    usdt = parse_spec("usdt:/x:p:n@arg1")
    assert kind_of(usdt).entry_name(usdt, "p:n", "any") == "p:n"


def test_a_launched_command_gets_the_layer_after_its_own() -> None:
    kind = kind_of(parse_spec("opencl:*"))
    layer = layer_path()
    assert kind.launch_env({}, 1.0) == {LAYERS_ENV: layer, BUDGET_ENV: "1.000000000"}
    assert kind.launch_env({LAYERS_ENV: f"/opt/theirs.so:{layer}"}, 0.02) == {
        LAYERS_ENV: f"/opt/theirs.so:{layer}",
        BUDGET_ENV: "0.020000000",
    }
    assert kind_of(parse_spec("uprobe:c:malloc")).launch_env({}, 0.02) == {}


def test_the_sites_programs_file_timed_and_counted_launches_under_one_row() -> None:
    """Both sites' programs read their two arguments from their own places and file
    under slot 0's row (its keys and its gate)."""
    reads = (parse_arg("8@%rdx"), parse_arg("8@%rax"))
    timed = Slot(0, "usdt-batch", arg=1, arg_type="str", args=reads, files_as=0)
    counted = Slot(1, "usdt-add", arg=1, arg_type="str", args=reads, files_as=0)
    plan = core_plan([timed, counted])
    assert plan.programs == {"at_s0": ("usdt_batch", 0), "at_s1": ("usdt_add", 1 | 2 << 32)}
    # struct pt_regs: dx is its 13th word, ax its 11th
    assert [(loc.kind, loc.reg) for loc in plan.locs] == [(LOC_REG, 96), (LOC_REG, 80)] * 2
    assert UNTIMED == (1 << 64) - 1  # bpf/module.h's UNTIMED


def test_a_sampled_rows_cost_is_its_timed_hits_and_its_counted_ones() -> None:
    """The budget prices a kernel row's launches as the layer spends on them: a timed
    one at the timed class's cost, a counted one at the count class's."""
    from adaptyst_top.collectors.probes.cost.budget import interval_cost_ns
    from adaptyst_top.collectors.probes.cost.table import DEFAULT_COSTS, CostTable
    from adaptyst_top.collectors.probes.model import Row

    costs = CostTable()
    row = Row(0, parse_spec("opencl:*"), "opencl:*", "/layer.so", "opencl-kernel", 0)
    row.interval_hits, row.interval_timed = 1000, 10
    timed, counted = DEFAULT_COSTS["opencl-kernel"], DEFAULT_COSTS["opencl-count"]
    assert interval_cost_ns(row, costs) == 1000 * timed.per_hit_ns  # no count class: all timed
    row.count_class = "opencl-count"
    assert interval_cost_ns(row, costs) == 10 * timed.per_hit_ns + 990 * counted.per_hit_ns
