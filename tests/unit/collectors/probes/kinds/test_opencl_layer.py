"""The OpenCL layer's own logic from inside (tests/support/targets/cl_layer_harness.c
includes its source): the budget read whatever the program's locale, a kernel made at a
released one's address filed under its own name, long names kept apart as Python names
their rows, a fork that leaves its child nothing to hand over twice."""

from __future__ import annotations

import subprocess
from pathlib import Path

from adaptyst_top.collectors.probes.kinds.device_layer import row_name
from tests.support.paths import REPO, TARGETS

KINDS = REPO / "src/adaptyst_top/collectors/probes/kinds"
SDT = REPO / "src/adaptyst_top/placement/include"


def test_the_layers_budget_kernel_names_and_forks(tmp_path: Path) -> None:
    harness = tmp_path / "harness"
    source = str(TARGETS / "cl_layer_harness.c")
    flags = ["-O1", "-Wall", "-Werror", f"-I{KINDS}", f"-I{SDT}"]
    subprocess.run(["gcc", *flags, "-o", str(harness), source, "-lpthread"], check=True)
    # A comma for the decimal point where the machine has such a locale (C's otherwise).
    env = {"LC_ALL": "de_DE.UTF-8", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([str(harness)], capture_output=True, text=True, env=env, timeout=30)
    assert out.stdout.strip().splitlines()[-1] == "ok", out.stdout
    # The C's cut of a long name is the one Python expects of rows.
    (hashed,) = [line.split() for line in out.stdout.splitlines() if line.startswith("hashed ")]
    assert row_name(hashed[1]) == hashed[2]
