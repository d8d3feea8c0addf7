"""`record --duration 3` on this machine: the CPU and the PoCL OpenCL device, energy
null with a reason (no RAPL here) or measured where the machine has it."""

from __future__ import annotations

import json
import subprocess
import sys


def test_record_devices_only() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "record", "--duration", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == 3
    devices = {d["id"]: d for d in lines[-1]["devices"]}
    cpu = devices["cpu"]
    assert cpu["kind"] == "cpu" and 0.0 <= cpu["util"] <= 1.0
    if cpu["energy_j"] is None:
        assert cpu["energy_source"] is None and cpu["note"]
    else:
        assert cpu["energy_source"] in ("rapl", "estimate")
    # The contract's names only; how the energy was had goes in energy_method.
    contract = {"rapl", "nvml", "amdsmi", "xrt", "hwmon", "estimate", None}
    for d in lines[-1]["devices"]:
        assert d["energy_source"] in contract and d["energy_method"] in ("counter", "power", None)
    opencl = [d for d in lines[-1]["devices"] if d["kind"] == "opencl"]
    assert any("Portable Computing Language" in d["name"] for d in opencl)
    assert all(d["extra"]["maps_to"] == "cpu" for d in opencl if d["extra"]["type"] == "cpu")
    sources = {s["name"]: s for s in lines[-1]["device_sources"]}
    assert sources["opencl"]["state"] == "ok"
    for s in sources.values():
        assert s["state"] == "ok" or s["reason"]


def test_record_with_power_model_labels_estimate() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "adaptyst_top.cli.start",
            "record",
            "--duration",
            "2",
            "--cpu-power-model",
            "20:120",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    cpu = json.loads(proc.stdout.splitlines()[-1])["devices"][0]
    if cpu["energy_source"] != "rapl":
        assert cpu["energy_source"] == "estimate" and cpu["energy_j"] > 0
