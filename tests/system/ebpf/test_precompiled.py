"""Probe modules and the process follower from programs compiled with the package
(CO-RE objects loaded by libbpf): no compiler runs, and the C and its Python mirror
agree on every map (root, real eBPF)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from adaptyst_top.collectors.probes.bpf.module_object import MAP_TYPES, core_plan, load_module
from adaptyst_top.collectors.probes.bpf.program import Slot
from adaptyst_top.collectors.probes.cost.oncpu import oncpu_offset
from adaptyst_top.collectors.probes.elf.usdt_args import parse_arg
from adaptyst_top.collectors.probes.safety.confinement import Confinement
from tests.support.bpf_objects import none_left, our_programs
from tests.support.marks import requires_root
from tests.support.workload import Workload

pytestmark = [pytest.mark.ebpf, requires_root]


@pytest.mark.parametrize("multi", [False, True], ids=["per-function", "multi-link"])
def test_every_map_agrees_with_the_c(multi: bool) -> None:
    slots = [Slot(0, "uprobe-entry"), Slot(1, "uprobe-entry", arg=2, arg_type="str")]
    obj = load_module("uprobe.bpf.o", slots, multi, Confinement.of(65534), oncpu_offset())
    try:
        for name in set(MAP_TYPES) & obj.map_names():  # each refuses where sizes differ
            assert obj[name].max_entries >= 1
        want = {"at_multi", "at_multi_ret"} if multi else {"at_entry", "at_return"}
        want.add("module_exit")  # a thread's stacks go with it
        assert set(obj.funcs) == want
        cfg = obj["slots"][MAP_TYPES["slots"][0](1)]
        assert (cfg.arg, cfg.arg_type, cfg.retval) == (2, 2, 0)
        assert obj["gate"].max_entries == len(slots)
    finally:
        obj.cleanup()
    assert none_left(), our_programs()


def test_usdt_sites_read_their_arguments_where_the_note_says() -> None:
    """A pair with a keyed BEGIN read in two places, and a device layer's batch site:
    each site's cookie points at its own argument places, loaded into `args`."""
    in_reg, in_mem = parse_arg("-4@%esi"), parse_arg("8@-16(%rbp,%rax,8)")
    slots = [
        Slot(0, "usdt-begin", 1, 1, "int", readers=(in_reg, in_mem)),
        Slot(1, "usdt-end", 1),
        Slot(2, "usdt-batch", args=(parse_arg("8@%rdi"), parse_arg("4@$7")), files_as=0),
    ]
    plan = core_plan(slots)
    obj = load_module("usdt.bpf.o", slots, False, None, None, plan)
    try:
        for name in set(MAP_TYPES) & obj.map_names():
            assert obj[name].max_entries >= 1
        assert plan.programs["at_s0"] == ("usdt_begin", 0)
        assert plan.programs["at_s0_1"] == ("usdt_begin", 1 << 32)
        assert plan.programs["at_s1"] == ("usdt_end", 1 | 0xFFFFFFFF << 32)
        assert plan.programs["at_s2"] == ("usdt_batch", 2 | 2 << 32)
        got = [obj["args"][MAP_TYPES["args"][0](i)] for i in range(4)]
        assert [(a.kind, a.size, a.is_signed, a.reg) for a in got[:1]] == [(2, 4, 1, 8 * 13)]
        assert (got[1].base, got[1].index, got[1].scale, got[1].disp) == (32, 80, 8, -16)
        assert (got[3].kind, got[3].value) == (1, 7)
        cfg = obj["slots"][MAP_TYPES["slots"][0](2)]
        assert (cfg.row, cfg.chain) == (0, 0)
        assert obj["slots"][MAP_TYPES["slots"][0](1)].chain == 1
    finally:
        obj.cleanup()
    assert none_left(), our_programs()


_ENGINE = """
import json, sys
from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.collectors.profile.sampler import Sampler
with ProbeEngine(pid=int(sys.argv[1])) as engine:
    group = engine.add(sys.argv[2])
    engine.wait(60)
    Sampler([int(sys.argv[1])], 99, lambda _event: None).close()
    maps = open("/proc/self/maps").read()
    print(json.dumps({"state": group.state, "error": group.error,
                      "compiled": sorted(m for m in sys.modules if m == "bcc"),
                      "compiler": [n for n in ("libLLVM", "libclang") if n in maps]}))
"""


def test_a_uprobe_and_a_profile_load_without_a_compiler(workload: Workload) -> None:
    """Neither bcc nor its clang is imported to probe a function and profile a process, and
    no compiler library is mapped into the process (it was ~80 MiB resident after a
    compile: results/2026-12-03-first-minutes-memory-cpu.md)."""
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
    assert got["compiled"] == [] and got["compiler"] == []
    assert none_left(), our_programs()


def test_a_thread_that_ends_mid_call_takes_its_open_frame_with_it() -> None:
    """A call that never returns (`_exit`) leaves its entry's frame in the thread's
    stack; the thread's number may next be another user's thread's, whose returns would
    pop it. The kernel drops a thread's stacks as it exits, not at the next reap."""
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
    from adaptyst_top.system.targets import resolve_target

    child = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; sys.stdin.readline(); os._exit(0)"],
        stdin=subprocess.PIPE,
    )
    assert child.stdin is not None
    try:
        with ProbeEngine(pid=child.pid) as engine:
            group = engine.add(f"uprobe:{resolve_target('c', child.pid)}:_exit")
            assert engine.wait(60) and group.state == "attached", group.error
            (module,) = engine.state.modules
            child.stdin.write(b"\n")
            child.stdin.flush()
            child.wait(30)
            assert list(module.bpf["stacks"].keys()) == []
    finally:
        child.kill()
        child.wait()
    assert none_left(), our_programs()


def test_a_map_kept_past_its_objects_close_reaches_nothing() -> None:
    """A map's descriptor number is another object's soon after its own closed (the
    agent loads one per user's spec): a late write must fail, not land there."""
    obj = load_module("uprobe.bpf.o", [Slot(0, "uprobe-entry")], False, None, None)
    gate = obj["gate"]
    gate[MAP_TYPES["gate"][0](0)] = MAP_TYPES["gate"][1](1)
    obj.cleanup()
    other = load_module("uprobe.bpf.o", [Slot(0, "uprobe-entry")], False, None, None)
    try:
        with pytest.raises(OSError):
            gate[MAP_TYPES["gate"][0](0)] = MAP_TYPES["gate"][1](1)
        with pytest.raises(OSError):
            obj["gate"]
        assert other["gate"][MAP_TYPES["gate"][0](0)].value == 0
    finally:
        other.cleanup()


def test_more_sessions_than_a_perf_tracepoint_takes_all_attach() -> None:
    """The kernel runs at most 64 perf-event programs on one tracepoint, node-wide
    (BPF_TRACE_MAX_PROGS); each session's follower, profile and probe module had one on
    sched_switch, sched_process_fork or sched_process_exit, and under load the agent's
    65th got E2BIG ("cannot attach module_exit"). BTF and raw tracepoints have no such
    bound: 70 of each attach, and the last follower still hears a fork."""
    from adaptyst_top.collectors.probes.bpf.module_object import EXIT
    from adaptyst_top.collectors.probes.engine.process_follow import ProcessEvent, ProcessFollower
    from adaptyst_top.collectors.profile import sampler

    n = 70  # above the perf-event bound whatever other tools hold
    held: list[object] = []
    followers: list[ProcessFollower] = []
    heard: list[ProcessEvent] = []
    try:
        for _ in range(n):
            obj = load_module("uprobe.bpf.o", [Slot(0, "uprobe-entry")], False, None, None)
            held.append(obj)
            obj.attach_program(EXIT)
            prof = sampler.load_program(None, -1)
            held.append(prof)
            for name in ("on_switch", "on_fork", "on_exit", "py_exec"):
                prof.attach_program(name)
            followers.append(ProcessFollower([], lambda e: None))
        last = ProcessFollower([], heard.append)
        followers.append(last)
        shell = subprocess.Popen(["sh", "-c", "read x; /bin/true"], stdin=subprocess.PIPE)
        last.add(shell.pid)
        shell.communicate(b"\n", timeout=30)
        deadline = time.monotonic() + 10
        while not any(e.kind == "fork" and e.parent == shell.pid for e in heard):
            assert time.monotonic() < deadline, heard
            time.sleep(0.05)
    finally:
        for f in followers:
            f.close()
        for obj in held:
            obj.cleanup()  # type: ignore[attr-defined]
