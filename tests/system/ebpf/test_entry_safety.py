"""A probe never changes what its target computes: attach points whose first
instruction the kernel single-steps are allowed only for classes verified on this boot
(AVX-512 came out wrong here), and refused with a one-line reason otherwise."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.engine.attach_plan import plan_function
from adaptyst_top.collectors.probes.helpers.build import build_helper
from adaptyst_top.collectors.probes.safety import entry_check
from adaptyst_top.collectors.probes.safety import entry_safety as es
from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS

BATTERY = TARGETS / "string_battery.c"


STRCHR = r"""
#include <stdio.h>
#include <string.h>
int main(void) {
    char buf[256];
    memset(buf, 'a', sizeof buf); buf[150] = '%'; buf[255] = 0;
    char *(*volatile find)(const char *, int) = strchr;
    printf("%ld\n", (long)(find(buf, '%') - buf));
    return 0;
}
"""


@pytest.mark.ebpf
@requires_root
def test_the_entry_check_runs_each_class_with_and_without_a_probe(tmp_path: Path) -> None:
    verdicts = entry_check.verify(build_helper("entry_check", tmp_path), calls=500)
    assert set(verdicts) == set(es.CHECKS)
    # Plain instructions are single-stepped correctly; the check must see that for real.
    assert verdicts[es.GP].status == "verified", verdicts[es.GP]
    if {"avx512f", "avx512vl", "avx512bw"} <= es.cpu_flags():
        assert verdicts[es.EVEX].status in ("verified", "failed")
    else:
        assert verdicts[es.EVEX].status == "unverifiable"
    assert none_left()


def _build(tmp_path: Path, name: str, source: str) -> Path:
    c = tmp_path / f"{name}.c"
    c.write_text(source)
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / name), str(c)], check=True)
    return tmp_path / name


@pytest.mark.ebpf
@requires_root
def test_a_probe_that_would_corrupt_strchr_is_refused_or_exact(tmp_path: Path) -> None:
    prog = _build(tmp_path, "find", STRCHR)
    r = subprocess.run(
        [*CLI, "record", "--probe", "uprobe:c:strchr", "--", str(prog)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    policy = es.policy_for_this_boot()
    from adaptyst_top.system.targets import resolve_target

    libc = resolve_target("c")
    strchr = next(f for f in read_elf(libc).functions if f.name == "strchr")
    planned = plan_function(libc, read_elf(libc), strchr, policy.refusal)
    insn, refused = planned.entry, planned.refused
    if refused:  # this machine: AVX-512 strchr, single-stepped wrongly
        assert r.returncode == 1, r.stderr
        assert r.stderr.count("\n") == 1 and "refused strchr" in r.stderr
        assert insn and insn.split()[0] in r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""
    elif "the kernel refused the probe" in r.stderr:  # an entry this kernel won't probe
        assert "Traceback" not in r.stderr
        assert r.returncode == 1 or "150" in r.stderr, r.stderr
    else:  # a safe entry: the probe runs and the answer is right
        assert r.returncode == 0, r.stderr
        assert "150" in r.stderr  # the command's stdout goes to stderr beside the JSON
    assert none_left()


@pytest.mark.ebpf
@requires_root
def test_every_string_function_probed_at_once_changes_no_byte(tmp_path: Path) -> None:
    prog = tmp_path / "battery"
    subprocess.run(["gcc", "-O1", "-o", str(prog), str(BATTERY)], check=True)
    plain = subprocess.run([str(prog)], capture_output=True, check=True).stdout
    out = tmp_path / "rec.jsonl"
    specs = ["str*", "mem*", "wcs*", "wmem*", "stpcpy"]
    r = subprocess.run(
        [*CLI, "record", "--interval", "10", "--out", str(out)]
        + [a for s in specs for a in ("--probe", f"uprobe:c:{s}")]
        + ["--", str(prog)],
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == plain  # byte-identical to the unprobed run
    probes = json.loads(out.read_text().splitlines()[-1])["probes"]
    rows = {p["name"]: p for p in probes}
    # What this machine answers decides what is expected: glibc picks its IFUNC variants
    # by CPU (EVEX here, AVX2 on a CPU without AVX-512), the entry check refuses what
    # failed or was never verified on this boot, and the kernel refuses some
    # instructions outright ("not supported by uprobes" for some AVX2 entries).
    refused_by_check = {
        f["name"]
        for f in json.loads(
            subprocess.run(
                [*CLI, "list", "--binary", "c", "--json", "--functions"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )["objects"][0]["functions"]
        if f["refused"]
    }
    for p in probes:
        if p["name"] in refused_by_check:  # refused: says why, names its instruction
            assert p["state"] == "error", p
            assert p["error"].startswith(f"refused {p['name']}") and "starts with `" in p["error"]
        elif p["state"] == "error":  # the kernel's own refusal, with its reason
            assert "the kernel refused the probe: " in p["error"], p
    # Calls of the battery (40 rounds) counted exactly wherever the probe is in.
    for name, calls in (("wcslen", 40), ("strcmp", 40)):
        if rows[name]["state"] != "error":
            assert rows[name]["count"] == calls, rows[name]
    assert rows["strlen"]["state"] == "error" or rows["strlen"]["count"] >= 40
    assert sum(1 for p in probes if p["state"] != "error" and p["count"] > 0) >= 5
    assert none_left()


@pytest.mark.ebpf
@requires_root
def test_list_says_which_functions_are_refused() -> None:
    r = subprocess.run(
        [*CLI, "list", "--binary", "c", "--json", "str*"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    funcs = {f["name"]: f for f in json.loads(r.stdout)["objects"][0]["functions"]}
    assert funcs["strlen"]["entry"] and funcs["strdup"]["refused"] is None
    policy = es.policy_for_this_boot()
    if policy.verdicts[es.EVEX].status == "failed":
        assert "vpbroadcastb" in funcs["strchr"]["refused"]
        text = subprocess.run(
            [*CLI, "list", "--binary", "c", "strchr"], capture_output=True, text=True
        )
        assert "refused strchr" in text.stdout
