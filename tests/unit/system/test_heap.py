"""What stays out of the monitor's memory: PoCL's LLVM (the OpenCL list is made in a
child), and the child itself once its parent is gone."""

from __future__ import annotations

import subprocess
import sys


def test_opencl_devices_are_listed_in_a_child_process() -> None:
    """PoCL's LLVM never enters the monitor (~75 MiB resident for its whole run)."""
    code = (
        "from adaptyst_top.collectors.devices.sweep import DeviceSweep\n"
        "s = DeviceSweep()\n"
        "print([d.name for d in s.opencl.devices])\n"
        "print(any('pocl' in l or 'OpenCL' in l for l in open('/proc/self/maps')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out[-1] == "False"
    assert "pthread" in out[-2] or "cpu" in out[-2].lower(), out  # PoCL's CPU device


def test_the_opencl_lister_never_outlives_its_parent() -> None:
    """Started for a PID that is not its parent (it died first), the lister exits at once
    with no answer; its parent's death otherwise kills it (PR_SET_PDEATHSIG)."""
    r = subprocess.run(
        [sys.executable, "-I", "-m", "adaptyst_top.collectors.devices.opencl_inventory", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert r.returncode == 1 and r.stdout == ""
