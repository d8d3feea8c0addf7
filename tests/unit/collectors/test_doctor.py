"""doctor: real checks where the machine has the thing, fakes with real names elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

from adaptyst_top.collectors import doctor
from adaptyst_top.collectors.devices.opencl_inventory import OpenCLDevice
from adaptyst_top.collectors.probes.bpf.ebpf_env import (
    CAP_BPF,
    CAP_PERFMON,
    PACKAGE,
    PRECOMPILED,
    check_btf,
    check_libbpf,
    check_privileges,
    check_uprobe_multi,
)
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.marks import IS_ROOT

ADAPTYST = [sys.executable, "-m", "adaptyst_top.cli.start"]


# --- eBPF, for real -------------------------------------------------------------


def test_multi_uprobe_links_said_by_kernel_release() -> None:
    assert check_uprobe_multi("6.18.44-fc").status == "ok"
    assert check_uprobe_multi("6.6.0").status == "ok"
    old = check_uprobe_multi("6.1.0-57-amd64")
    assert old.status == "degraded" and "one uprobe per function" in old.detail
    assert check_uprobe_multi("unknown").status == "degraded"


def test_privileges_from_capabilities() -> None:
    assert check_privileges(euid=0, caps=0).status == "ok"
    both = (1 << CAP_BPF) | (1 << CAP_PERFMON)
    assert check_privileges(euid=1000, caps=both).status == "ok"
    denied = check_privileges(euid=1000, caps=1 << CAP_BPF)
    assert denied.status == "denied" and "CAP_BPF" in denied.fix


def test_libbpf_and_the_built_programs_are_what_ebpf_needs(tmp_path: Path) -> None:
    """No compiler, no kernel headers: libbpf and the package's objects, and BTF."""
    assert check_libbpf().status == "ok"  # this checkout was built by make setup
    missing = check_libbpf(tmp_path)  # a package whose objects were never built
    assert missing.status == "missing" and "not built" in missing.detail
    assert "clang" in missing.fix


def test_btf_missing_is_said_with_what_it_costs(tmp_path: Path) -> None:
    assert check_btf().status == "ok"  # this kernel describes itself
    none = check_btf(tmp_path / "vmlinux")
    assert none.status == "degraded" and "no profile" in none.detail
    assert "CONFIG_DEBUG_INFO_BTF" in none.fix


def test_every_program_source_is_built_and_checked() -> None:
    """PRECOMPILED names exactly the `*.bpf.c` of the sources, built beside them."""
    sources = {str(p.relative_to(PACKAGE).with_suffix(".o")) for p in PACKAGE.rglob("*.bpf.c")}
    assert sources == set(PRECOMPILED)


# --- NVML: fake module raising the real pynvml error classes ------------------


def test_nvml_real_library_absent_here() -> None:
    cap = doctor.check_nvml()
    # This machine has no NVIDIA driver; a GPU node would say ok.
    assert cap.status in ("missing", "ok")
    if cap.status == "missing":
        assert cap.fix


@pytest.mark.parametrize(
    ("code", "status", "word"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "missing", "driver"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "missing", "modprobe"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "denied", "video"),
    ],
)
def test_nvml_init_errors(code: int, status: str, word: str) -> None:
    cap = doctor.check_nvml(FakeNvml(init_error=code))  # type: ignore[arg-type]
    assert cap.status == status
    assert word in (cap.detail + cap.fix)


def test_nvml_devices_listed_and_shut_down() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu(bus_id="00000000:18:00.0")])
    cap = doctor.check_nvml(fake)
    assert cap.status == "ok" and "2 GPU(s)" in cap.detail and "580.95.05" in cap.detail
    assert fake.shutdowns == 1


# --- RAPL / AMD / FPGA: fake sysfs trees -----------------------------------------


def test_rapl_missing_denied_ok(tmp_path: Path) -> None:
    assert doctor.check_rapl(tmp_path).status == "missing"
    zone = tmp_path / "class/powercap/intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("123456\n")
    assert doctor.check_rapl(tmp_path).status == "ok"
    if not IS_ROOT:  # root reads a 0000 file anyway
        (zone / "energy_uj").chmod(0)
        assert doctor.check_rapl(tmp_path).status == "denied"


@pytest.mark.usefixtures("energy_uj_denied")
def test_rapl_permission_error_is_denied(tmp_path: Path) -> None:
    zone = tmp_path / "class/powercap/intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text("1\n")
    cap = doctor.check_rapl(tmp_path)
    assert cap.status == "denied" and "CVE-2020-8694" in cap.detail


def test_amd_gpu_from_hwmon(tmp_path: Path) -> None:
    assert doctor.check_amd_gpu(tmp_path).status == "missing"
    dev = tmp_path / "class/drm/card0/device"
    (dev / "hwmon/hwmon3").mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "hwmon/hwmon3/power1_average").write_text("41000000\n")
    cap = doctor.check_amd_gpu(tmp_path)
    assert cap.status == "ok" and "power1_average" in cap.detail


def test_fpga_from_opencl_accelerator_and_dfl(tmp_path: Path) -> None:
    none = doctor.check_fpga(tmp_path, tmp_path, lister=lambda: [])
    assert none.status == "missing"
    acc = OpenCLDevice("Xilinx", "xilinx_u250_gen3x16", "accelerator", "Xilinx", 1, 64 << 30)
    assert doctor.check_fpga(tmp_path, tmp_path, lister=lambda: [acc]).status == "ok"
    (tmp_path / "bus/dfl/devices/dfl_dev.0").mkdir(parents=True)
    cap = doctor.check_fpga(tmp_path, tmp_path, lister=lambda: [])
    assert cap.status == "ok" and "DFL" in cap.detail


def test_opencl_real_pocl() -> None:
    cap = doctor.check_opencl()
    assert cap.status == "ok", cap.detail
    assert "cpu:" in cap.detail


def test_opencl_no_platform() -> None:
    def fail() -> list[OpenCLDevice]:
        raise RuntimeError("no OpenCL platform: clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    cap = doctor.check_opencl(fail)
    assert cap.status == "missing" and "PLATFORM_NOT_FOUND" in cap.detail


# --- the command ------------------------------------------------------------------


def test_doctor_cli_one_line_per_capability() -> None:
    proc = subprocess.run([*ADAPTYST, "doctor"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    names = [ln.split()[0] for ln in lines]
    # The CPU, eBPF, each device source's checks in the sweep's order (SOURCES), then
    # the rest.
    assert names == [
        "cpu",
        "ebpf",
        "rapl",
        "nvml",
        "amd-gpu",
        "fpga",
        "opencl",
        "debug-names",
        "python",
        "agent",
    ]
    status = {ln.split()[0]: ln.split()[1] for ln in lines}
    assert status["opencl"] == "ok"
    if IS_ROOT:
        assert status["ebpf"] in ("ok", "degraded")


def test_doctor_cli_json() -> None:
    proc = subprocess.run(
        [*ADAPTYST, "doctor", "--json", "--no-smoke"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0
    caps = json.loads(proc.stdout)
    assert {c["name"] for c in caps} >= {"ebpf", "nvml", "rapl", "amd-gpu", "opencl", "fpga"}
    for c in caps:
        assert c["status"] in ("ok", "missing", "denied", "degraded")
        assert set(c) >= {"name", "status", "detail", "fix"}


@pytest.mark.parametrize("sub", [[], ["doctor"], ["demo"], ["record"], ["list"], ["replay"]])
def test_version_and_help(sub: list[str]) -> None:
    for flag in ("--version", "--help"):
        proc = subprocess.run([*ADAPTYST, *sub, flag], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "adaptyst-top" in proc.stdout


def test_fake_nvml_matches_pynvml_surface() -> None:
    # The fake may only use names the real module has.
    for name in dir(FakeNvml):
        if name.startswith(("nvml", "NVML")):
            assert hasattr(pynvml, name), name


def test_doctor_shows_a_typed_path_inert(tmp_path: Path) -> None:
    """A socket path with escape sequences (retitle, clear the screen) is shown, not run."""
    path = f"{tmp_path}/\x1b]0;pwned\x07\x1b[2J\x1b[H.sock"
    r = subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "doctor", "--no-smoke", "--agent", path],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout, r.stdout
    agent = [line for line in r.stdout.splitlines() if line.startswith("agent")]
    assert len(agent) == 1 and "pwned" in agent[0], r.stdout


def test_debug_names_says_which_sources_the_node_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adaptyst_top.collectors.doctor import check_debug_names

    monkeypatch.delenv("DEBUGINFOD_URLS", raising=False)
    none = check_debug_names(tmp_path)
    assert none.status == "degraded" and "by address" in none.detail and none.fix
    (tmp_path / ".build-id" / "ab").mkdir(parents=True)
    (tmp_path / ".build-id" / "ab" / "cdef.debug").write_bytes(b"")
    monkeypatch.setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1")
    both = check_debug_names(tmp_path)
    assert both.status == "ok" and "1 debug file(s)" in both.detail
    assert "debuginfod: http://127.0.0.1:1" in both.detail


def test_python_says_which_interpreters_the_profile_knows(tmp_path: Path) -> None:
    from adaptyst_top.collectors.doctor import check_python

    assert check_python((str(tmp_path),)).status == "missing"
    exe = tmp_path / "python3.12"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (tmp_path / "python3.99").write_text("")  # unknown: not offered
    ok = check_python((str(tmp_path),))
    assert ok.status == "ok" and "3.12" in ok.detail and "3.99" not in ok.detail
