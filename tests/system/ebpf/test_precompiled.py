"""Probe modules and the process follower from programs compiled with the package
(CO-RE objects loaded by libbpf): no compiler runs, and the C and its Python mirror
agree on every map (root, real eBPF)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adaptyst_top.collectors.probes.bpf_program import Slot
from adaptyst_top.collectors.probes.confinement import Confinement
from adaptyst_top.collectors.probes.module_object import MAP_TYPES, load_module
from adaptyst_top.collectors.probes.oncpu import oncpu_offset
from tests.support.bpf_objects import none_left, our_programs
from tests.support.marks import requires_root
from tests.support.workload import Workload

pytestmark = [pytest.mark.ebpf, requires_root]


@pytest.mark.parametrize("multi", [False, True], ids=["per-function", "multi-link"])
def test_every_map_agrees_with_the_c(multi: bool) -> None:
    slots = [Slot(0, "uprobe-entry"), Slot(1, "uprobe-entry", arg=2, arg_type="str")]
    obj = load_module("uprobe.bpf.o", slots, multi, Confinement.of(65534), oncpu_offset())
    try:
        for name in MAP_TYPES:  # each refuses to open where the sizes differ
            assert obj[name].max_entries >= 1
        want = {"at_multi", "at_multi_ret"} if multi else {"at_entry", "at_return"}
        assert set(obj.funcs) == want
        cfg = obj["slots"][MAP_TYPES["slots"][0](1)]
        assert (cfg.arg, cfg.arg_type, cfg.retval) == (2, 2, 0)
        assert obj["gate"].max_entries == len(slots)
    finally:
        obj.cleanup()
    assert none_left(), our_programs()


_ENGINE = """
import json, sys
from adaptyst_top.collectors.probes.engine import ProbeEngine
with ProbeEngine(pid=int(sys.argv[1])) as engine:
    group = engine.add(sys.argv[2])
    engine.wait(60)
    print(json.dumps({"state": group.state, "error": group.error,
                      "compiled": sorted(m for m in sys.modules if m == "bcc")}))
"""


def test_a_uprobe_and_its_follower_load_without_bcc(workload: Workload) -> None:
    """Neither bcc nor its clang is imported to probe a function and follow children."""
    spec = f"uprobe:{workload.binary}:*_fn"
    out = subprocess.run(
        [sys.executable, "-c", _ENGINE, str(workload.pid), spec],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["state"] == "attached", got["error"]
    assert got["compiled"] == []
    assert none_left(), our_programs()
