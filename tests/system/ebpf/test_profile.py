"""Sampled profiles for real: a target built without frame pointers, whose time is split
between functions by construction and which measures that split itself, recorded with
--profile and exported as folded stacks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.profile.budget import MIN_HZ
from adaptyst_top.snapshot import ProbeEntry
from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.spin import BUSY_LOOP, spin, without_coverage
from tests.support.workload import build_c
from tests.system.ebpf.test_python_frames import INTERPRETERS, version_of

SECONDS = 10  # beside two busy loops 5 s missed the 5-point bound (1 run in 3)
# A share of n samples is off by sqrt(p(1 - p) / n): at 99 Hz for 4 s (~320 samples of the
# main thread) 2.8 points for p = 0.5, and a 5-point bound failed 1 run in 15. At 497 Hz
# for 5 s (~2,000 samples): 1.1 points, the bound 4.5 sigma away.
HZ = 497


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("profiled")
    return build_c(TARGETS / "profiled.c", d, "-O2", "-fomit-frame-pointer", "-pthread")


def _export(recording: Path, *flags: str) -> dict[str, int]:
    out = subprocess.run(
        [*CLI, "export", str(recording), "--folded", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    stacks = {}
    for line in out.splitlines():
        stack, _, count = line.rpartition(" ")
        stacks[stack] = int(count)
    return stacks


@pytest.mark.ebpf
@requires_root
def test_shares_callers_and_sleep_as_the_target_measured_them(
    profiled: Path, tmp_path: Path
) -> None:
    rec = tmp_path / "rec.jsonl"
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--profile-hz",
            str(HZ),
            "--interval",
            "0.5",
            "--out",
            str(rec),
            "--",
            str(profiled),
            str(SECONDS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = [json.loads(line) for line in rec.read_text().splitlines()]
    profile = lines[-1]["profile"]
    assert profile["hz"] == HZ and profile["lost"] == 0
    functions = {f["name"]: f for f in profile["functions"]}

    # Every thread's on-CPU time is the main thread's spinning, bar a few clock reads.
    spun = truth["outer_a"] + truth["outer_b"] + truth["heavy"]
    in_main = functions["main"]["total"]
    assert in_main >= 0.5 * HZ * spun  # sampled at about the rate asked for
    for name in ("outer_a", "outer_b", "heavy"):
        share = functions[name]["total"] / in_main
        assert abs(share - truth[name] / spun) <= 0.05, (name, share, truth)
    leaf_self = functions["leaf"]["self"] / in_main
    assert abs(leaf_self - (truth["outer_a"] + truth["outer_b"]) / spun) <= 0.05
    assert functions["heavy"]["self"] == pytest.approx(functions["heavy"]["total"], abs=2)

    # Callers found from the tables alone: the unwind reached the outermost frame.
    assert profile["complete"] >= 0.9 * profile["samples"]

    # Off the CPU: the sleeper's time, against what it summed itself.
    off_s = functions["sleeper_wait"]["off_ns"] / 1e9
    assert off_s == pytest.approx(truth["slept"], rel=0.10)

    on = _export(rec)
    assert sum(on.values()) == profile["samples"]
    a = sum(v for k, v in on.items() if k.endswith("main;outer_a;leaf"))
    assert a == pytest.approx(functions["outer_a"]["total"], abs=2)
    off = _export(rec, "--off")
    slept = sum(v for k, v in off.items() if ";sleeper_wait;" in k)
    assert slept / 1e9 == pytest.approx(truth["slept"], rel=0.10)
    assert none_left()


@pytest.mark.ebpf
@requires_root
def test_over_the_budget_the_rate_is_lowered_and_said(profiled: Path, tmp_path: Path) -> None:
    """At 999 Hz a sample's few microseconds in the kernel are ~0.3% of the target's CPU:
    over a 0.05% budget, the rate is halved until it fits (or reaches the floor)."""
    rec = tmp_path / "rec.jsonl"
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--profile-hz",
            "999",
            "--budget",
            "0.05",
            "--interval",
            "0.2",
            "--out",
            str(rec),
            "--",
            str(profiled),
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        # The monitor's own pace is under test: under coverage's tracer and a loaded node
        # its unwinding fell so far behind that 2 snapshots came in 4 s, none measured.
        env=without_coverage(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    profiles = [json.loads(line)["profile"] for line in rec.read_text().splitlines()]
    last = profiles[-1]
    assert last["asked_hz"] == 999 and MIN_HZ <= last["hz"] < 999
    assert "profile rate lowered to" in last["note"] and "budget 0%" not in last["note"]
    rates = [p["hz"] for p in profiles]
    assert rates == sorted(rates, reverse=True)  # only ever lowered
    assert none_left()


CLOCK_SPIN_C = r"""
#include <time.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
__attribute__((noinline)) void timed_spin(double s) {
    double end = now() + s; while (now() < end) {} __asm__ volatile("");
}
int main(void) { timed_spin(2.0); return 0; }
"""


@pytest.mark.ebpf
@requires_root
def test_a_loop_that_reads_the_clock_is_unwound_through_the_vdso(tmp_path: Path) -> None:
    """Its samples fall in the kernel's vDSO, which no file holds: its tables come from
    the vDSO image itself, so the caller is found, not [unknown]."""
    (tmp_path / "clock_spin.c").write_text(CLOCK_SPIN_C)
    binary = build_c(tmp_path / "clock_spin.c", tmp_path, "-O2", "-fomit-frame-pointer")
    rec = tmp_path / "rec.jsonl"
    proc = subprocess.run(
        [*CLI, "record", "--profile-hz", "199", "--out", str(rec), "--", str(binary)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    stacks = _export(rec)
    total = sum(stacks.values())
    # Where such a loop spends its time: the vDSO's clock_gettime, under libc's.
    in_vdso = sum(v for k, v in stacks.items() if k.endswith("clock_gettime;clock_gettime"))
    assert in_vdso >= 0.3 * total, stacks
    # And every caller found from there, to _start.
    whole = sum(v for k, v in stacks.items() if k.startswith("_start;") and ";main;timed_spin" in k)
    assert whole >= 0.9 * total, stacks


@pytest.mark.ebpf
@requires_root
def test_profile_without_a_target_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "record", "--profile", "--duration", "1", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0 and "--profile needs a target" in proc.stderr


def test_export_folded_of_a_recording_without_a_profile_is_one_line(tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps({"t": 1.0, "host": "h", "schema_version": 1}) + "\n")
    proc = subprocess.run(
        [*CLI, "export", str(rec), "--folded"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert "no profile in it" in proc.stderr and proc.stderr.count("\n") == 1


async def _two_keys_to_a_histogram(command: list[str], hot: str) -> ProbeEntry:
    """From launch under the monitor (profiling), `f` and `u`: the profile opens on its
    hottest function by self time (HOT), and `u` times it exactly and opens its
    histogram once attached. Its row, once it has counted calls."""
    from adaptyst_top.runtime.session import open_session
    from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target
    from adaptyst_top.runtime.sources import LiveSource
    from adaptyst_top.tui.app import MonitorApp
    from adaptyst_top.tui.screens.detail import DetailScreen
    from adaptyst_top.tui.screens.profile import ProfileScreen

    session = open_session(
        SessionOptions(
            Target(command=command, python_later=True, child_stdout=subprocess.DEVNULL),
            ProbeSettings(profile_hz=99),
        )
    )
    session.start()
    app = MonitorApp(LiveSource(session), interval=0.25)
    keys = 0
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(40):  # until the hot function leads by self time
                await pilot.pause(0.25)
                funcs = app.profile_view.sorted_functions()
                if funcs and funcs[0].name == hot and app.profile_view.samples > 50:
                    break
            await pilot.press("f")
            keys += 1
            assert isinstance(app.screen, ProfileScreen)
            assert app.screen.selected_function().name == hot  # type: ignore[union-attr]
            await pilot.press("u")
            keys += 1
            assert session.ensure_engine().wait(60) if session.remote is None else True
            for _ in range(80):
                await pilot.pause(0.25)
                if isinstance(app.screen, DetailScreen):
                    entry = app.probes.entries[app.screen.key]
                    if entry.count > 0:
                        break
            assert isinstance(app.screen, DetailScreen), app.status
            assert keys == 2
            await pilot.press("q", "q")
    finally:
        session.close()
    assert none_left()
    return entry


@pytest.mark.ebpf
@requires_root
async def test_a_hot_function_is_timed_exactly_two_keys_from_launch(profiled: Path) -> None:
    entry = await _two_keys_to_a_histogram([str(profiled), "60"], "leaf")
    assert entry.state == "attached" and entry.count > 0 and entry.name == "leaf"
    assert entry.spec == f"uprobe:{profiled}:leaf"


@pytest.mark.ebpf
@requires_root
@pytest.mark.parametrize(
    "python", [p for p in INTERPRETERS if version_of(p) >= (3, 12)][-1:] or ["none"]
)
async def test_a_hot_python_function_is_timed_exactly_two_keys_from_launch(python: str) -> None:
    assert python != "none", "no CPython 3.12+ on this node"
    program = TARGETS / "py_calls.py"
    entry = await _two_keys_to_a_histogram([python, str(program), "60"], "spin")
    assert entry.kind == "python" and entry.count > 0 and entry.name == "spin"
    assert entry.spec == f"python:{program}:spin"


@pytest.mark.ebpf
@requires_root
async def test_with_no_target_the_monitor_opens_on_processes_and_profiles_a_pick(
    profiled: Path,
) -> None:
    from adaptyst_top.runtime.session import open_session
    from adaptyst_top.runtime.session_options import SessionOptions
    from adaptyst_top.runtime.sources import LiveSource
    from adaptyst_top.tui.app import MonitorApp
    from adaptyst_top.tui.screens.processes import ProcessScreen
    from adaptyst_top.tui.screens.profile import ProfileScreen

    busy = subprocess.Popen([str(profiled), "60"], stdout=subprocess.DEVNULL)
    session = open_session(SessionOptions())
    app = MonitorApp(LiveSource(session), interval=0.25)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(40):  # the list, with the busy process in it
                await pilot.pause(0.25)
                screen = app.screen
                if isinstance(screen, ProcessScreen) and any(
                    r.pid == busy.pid for r in screen.rows
                ):
                    break
            assert isinstance(screen, ProcessScreen)
            assert screen.rows[0].cpu >= screen.rows[-1].cpu  # by CPU, the busiest first
            screen.row = next(i for i, r in enumerate(screen.rows) if r.pid == busy.pid)
            await pilot.press("enter")
            assert isinstance(app.screen, ProfileScreen), app.status
            for _ in range(60):
                await pilot.pause(0.25)
                if any(f.name == "leaf" for f in app.profile_view.functions):
                    break
            names = {f.name for f in app.profile_view.functions}
            assert {"leaf", "outer_a", "heavy", "main"} <= names
            await pilot.press("q", "q")
    finally:
        session.close()
        busy.kill()
        busy.wait()
    assert none_left()


@pytest.mark.ebpf
@requires_root
def test_time_waiting_for_a_busy_core_is_runnable_not_blocked(
    profiled: Path, tmp_path: Path
) -> None:
    """The target and a busy loop share one core: the target's waits for it are
    preempted (runnable) time, and its sleeper's are blocked time as it summed them."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    hog = spin(["taskset", "-c", str(cpu), *BUSY_LOOP])
    rec = tmp_path / "rec.jsonl"
    try:
        proc = subprocess.run(
            [
                *CLI,
                "record",
                "--profile",
                "--interval",
                "1",
                "--out",
                str(rec),
                "--",
                "taskset",
                "-c",
                str(cpu),
                str(profiled),
                "3",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        hog.kill()
        hog.wait()
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    profile = json.loads(rec.read_text().splitlines()[-1])["profile"]
    functions = {f["name"]: f for f in profile["functions"]}
    # About half of the main thread's 3 s went to the loop: preempted, not blocked.
    assert profile["runnable_ns"] / 1e9 > 0.5
    assert functions["sleeper_wait"]["off_ns"] / 1e9 >= 0.9 * truth["slept"]
    assert profile["off_ns"] / 1e9 == pytest.approx(truth["slept"], rel=0.2)


@pytest.mark.ebpf
@requires_root
def test_blocked_time_is_charged_only_to_the_stack_that_blocked(tmp_path: Path) -> None:
    """One thread computes in two leaves and blocks only in waiter(), a busy loop on its
    core: its switch-outs alternate between a preempted leaf and waiter within one
    sampling period. Each interval is charged to the stack that switched out (31% of the
    blocked time once went to the leaves, which never block: an interval whose stack was
    not copied was charged to the last copy, wherever that was)."""
    target = build_c(TARGETS / "blocks_in_one.c", tmp_path, "-O2", "-fomit-frame-pointer")
    cpu = sorted(os.sched_getaffinity(0))[0]
    hog = spin(["taskset", "-c", str(cpu), *BUSY_LOOP])
    rec = tmp_path / "rec.jsonl"
    try:
        proc = subprocess.run(
            [*CLI, "record", "--profile", "--interval", "1", "--out", str(rec), "--",
             "taskset", "-c", str(cpu), str(target), "4"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        hog.kill()
        hog.wait()
    assert proc.returncode == 0, proc.stderr
    waited = json.loads(proc.stdout.strip().splitlines()[-1])["waited"]
    # Blocked ns on waiter's stacks, on the compute stacks (which never block), and on
    # stacks whose unwind stopped in libc before reaching either ([unknown]).
    blocked = {"waiter": 0.0, "compute": 0.0, "unknown": 0.0}
    in_waiter = 0.0
    for line in rec.read_text().splitlines():
        for s in (json.loads(line).get("profile") or {}).get("stacks", []):
            frames = set(s["frames"])
            where = (
                "waiter" if "waiter" in frames
                else "compute" if frames & {"leaf_x", "leaf_y", "outer_a", "outer_b"}
                else "unknown"
            )  # fmt: skip
            blocked[where] += s.get("off_ns", 0.0)
            if where == "waiter":
                in_waiter += s.get("off_ns", 0.0) + s.get("runnable_ns", 0.0)
    total = sum(blocked.values())
    assert total > 0.5 * waited * 1e9, (blocked, waited)
    # Before: 3.0% here (the run: 31%); now none (the issue asks < 2%).
    assert blocked["compute"] < 0.01 * total, (blocked, waited)
    # Before: 1.095 (the leaves' preemptions charged to waiter); now 0.97.
    assert in_waiter / 1e9 == pytest.approx(waited, rel=0.10), (blocked, in_waiter, waited)
    assert none_left()
