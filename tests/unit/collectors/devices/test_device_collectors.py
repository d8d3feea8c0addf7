"""Device collectors: real psutil and PoCL here; fakes with the real names, units and
errors for NVML, RAPL, AMD hwmon, XRT and DFL."""

from __future__ import annotations

import os
import time
import types
from pathlib import Path

import pynvml
import pytest

from adaptyst_top.collectors.devices.amd_gpu import AmdGpuCollector
from adaptyst_top.collectors.devices.cpu import CpuCollector, PowerModel
from adaptyst_top.collectors.devices.fpga import FpgaCollector
from adaptyst_top.collectors.devices.nvml import COUNTER_EVERY_S, NvmlCollector
from adaptyst_top.collectors.devices.opencl import OpenCLCollector
from adaptyst_top.collectors.devices.opencl_inventory import OpenCLDevice, SharedListing
from adaptyst_top.collectors.devices.opencl_platforms import platforms_in_use
from adaptyst_top.collectors.devices.rapl import RaplReader
from adaptyst_top.collectors.devices.sweep import DeviceSweep
from tests.support.fake_nvml import FakeGpu, FakeNvml, mig_aware


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


# --- CPU (real psutil) --------------------------------------------------------------


def test_cpu_real_readings() -> None:
    c = CpuCollector(pid=os.getpid())
    sum(i * i for i in range(200_000))
    (r,) = c.read()
    assert r.id == "cpu" and r.kind == "cpu"
    assert r.util is not None and 0.0 <= r.util <= 1.0
    assert len(r.extra["per_core"]) == os.cpu_count()
    assert 0 < r.mem_used_bytes < r.mem_total_bytes
    assert r.extra["target_cpu_s"] > 0
    if not Path("/sys/class/powercap/intel-rapl:0").exists():
        assert r.energy_j is None and r.energy_source is None
        assert "no powercap RAPL" in r.note


def test_cpu_power_model_is_a_labelled_estimate(tmp_path: Path) -> None:
    c = CpuCollector(power_model=PowerModel.parse("10:90"), sysfs=tmp_path)
    c.read(now=0.0)
    (r,) = c.read(now=2.0)
    assert r.energy_source == "estimate" and "estimate" in r.note
    assert r.energy_j is not None and 20.0 <= r.energy_j <= 180.0  # 10..90 W over 2 s
    with pytest.raises(ValueError, match="IDLE_W:MAX_W"):
        PowerModel.parse("fast")


# --- RAPL (fake powercap tree) --------------------------------------------------------


def rapl_tree(root: Path, psys: bool = False) -> None:
    base = root / "class/powercap"
    zones = {
        "intel-rapl:0": ("package-0", 1_000_000),
        "intel-rapl:0:0": ("core", 400_000),
        "intel-rapl:0:1": ("uncore", 100_000),
        "intel-rapl:0:2": ("dram", 300_000),
        "intel-rapl:1": ("package-1", 2_000_000),
    }
    if psys:
        zones["intel-rapl:2"] = ("psys", 9_000_000)
    for zid, (name, energy) in zones.items():
        write(base / zid / "name", name)
        write(base / zid / "energy_uj", str(energy))
        write(base / zid / "max_energy_range_uj", "262143328850")


def set_energy(root: Path, zone: str, uj: int) -> None:
    write(root / "class/powercap" / zone / "energy_uj", str(uj))


def test_rapl_sums_packages_and_dram_once(tmp_path: Path) -> None:
    rapl_tree(tmp_path)
    r = RaplReader(tmp_path)
    assert sorted(z.name for z in r.zones) == ["dram", "package-0", "package-1"]
    r.read(now=0.0)
    set_energy(tmp_path, "intel-rapl:0", 1_000_000 + 50_000_000)  # +50 J
    set_energy(tmp_path, "intel-rapl:0:0", 400_000 + 30_000_000)  # inside the package
    set_energy(tmp_path, "intel-rapl:0:2", 300_000 + 10_000_000)  # +10 J
    set_energy(tmp_path, "intel-rapl:1", 2_000_000 + 40_000_000)  # +40 J
    e = r.read(now=1.0)
    assert e is not None and e.source == "rapl"
    assert abs(e.energy_j - 100.0) < 1e-9 and abs(e.power_w - 100.0) < 1e-9


def test_rapl_psys_alone_when_present(tmp_path: Path) -> None:
    rapl_tree(tmp_path, psys=True)
    assert [z.name for z in RaplReader(tmp_path).zones] == ["psys"]


def test_rapl_wraparound(tmp_path: Path) -> None:
    rapl_tree(tmp_path)
    r = RaplReader(tmp_path)
    set_energy(tmp_path, "intel-rapl:0", 262_143_328_850 - 5_000_000)
    r.read(now=0.0)
    set_energy(tmp_path, "intel-rapl:0", 7_000_000)  # wrapped: 5 J + 7 J
    e = r.read(now=1.0)
    assert e is not None and abs(e.energy_j - 12.0) < 1e-6


def test_rapl_denied_is_a_state_never_zero(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    rapl_tree(tmp_path)  # written before the reads start failing
    request.getfixturevalue("energy_uj_denied")
    c = CpuCollector(sysfs=tmp_path)
    (r,) = c.read()
    assert r.energy_j is None and r.power_w is None
    assert c.rapl.state == "denied" and "CVE-2020-8694" in r.note


# --- NVML (fake module, real pynvml errors) ---------------------------------------------


def test_nvml_energy_counter_read_every_few_seconds_power_in_between() -> None:
    # On an H200 the counter costs ~3.2 ms of CPU a read and moves every 100 ms; power
    # (instant field, 5 us) fills the seconds between two reads, the counter then rules.
    fake = FakeNvml([FakeGpu(instant_mw=300_000, energy_mj=1_000_000)])
    c = NvmlCollector(fake)
    readings = []
    for t in range(int(2 * COUNTER_EVERY_S) + 1):
        readings.append(c.read(now=float(t))[0])
        fake.gpus[0].energy_mj += 320_000  # the counter: 320 W where power reads 300 W
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 3  # at 0, 5 and 10 s
    assert readings[1].energy_method == "power" and readings[1].energy_j == 300.0
    at = int(COUNTER_EVERY_S)
    assert readings[at].energy_method == "counter"
    assert readings[at].energy_j == pytest.approx(320.0 * at)  # the counter replaced power
    assert readings[-1].energy_j == pytest.approx(320.0 * 2 * at)
    shown = [r.energy_j for r in readings]
    assert shown == sorted(shown)  # never backwards


def test_nvml_memory_leaves_out_the_drivers_reservation() -> None:
    # An idle H200 (driver 580): v1 used = 644939776 = v2 reserved, v2 used = 0.
    fake = FakeNvml([FakeGpu(mem_used=0, mem_reserved=644939776, mem_total=150754820096)])
    (r,) = NvmlCollector(fake).read(now=0.0)
    assert r.mem_used_bytes == 0 and r.extra["mem_reserved_bytes"] == 644939776
    # A driver without nvmlDeviceGetMemoryInfo_v2: v1, asked once for v2 and never again.
    old = FakeNvml([FakeGpu(mem_used=0, mem_reserved=644939776)])
    old.gpus[0].errors["nvmlDeviceGetMemoryInfo_v2"] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    c = NvmlCollector(old)
    for t in range(3):
        (r,) = c.read(now=float(t))
    assert r.mem_used_bytes == 644939776 and "mem_reserved_bytes" not in r.extra
    assert old.calls["nvmlDeviceGetMemoryInfo_v2"] == 1


def test_nvml_not_supported_is_not_asked_again() -> None:
    fake = FakeNvml([FakeGpu(instant_mw=None, energy_mj=None)])
    c = NvmlCollector(fake)
    for t in range(4):
        (r,) = c.read(now=float(t))
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1
    assert r.power_w == 300.0  # nvmlDeviceGetPowerUsage, mW -> W
    assert r.energy_source == "nvml" and r.energy_method == "power"
    assert r.energy_j == pytest.approx(900.0)


def test_nvml_no_permission_is_said() -> None:
    fake = FakeNvml(
        [FakeGpu(errors={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NO_PERMISSION})]
    )
    (r,) = NvmlCollector(fake).read(now=0.0)
    assert "no permission" in r.note and "processes" in r.note
    assert r.util == 0.5  # the rest still read


def test_nvml_gpu_lost_mid_run_keeps_the_others() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu(bus_id="00000000:18:00.0")])
    c = NvmlCollector(fake)
    c.read(now=0.0)
    fake.gpus[1].lost = True
    r0, r1 = c.read(now=1.0)
    assert r0.util == 0.5 and "lost" not in r0.note
    assert "GPU lost" in r1.note and r1.util is None
    calls = dict(fake.calls)
    r0, r1 = c.read(now=2.0)
    assert "GPU lost" in r1.note
    # The lost GPU is not polled again; the other one is.
    assert fake.calls["nvmlDeviceGetUtilizationRates"] == calls["nvmlDeviceGetUtilizationRates"] + 1


@pytest.mark.parametrize(
    ("code", "state"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "missing"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "missing"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "denied"),
    ],
)
def test_nvml_unavailable_is_a_state(code: int, state: str) -> None:
    c = NvmlCollector(FakeNvml(init_error=code))
    assert c.state == state and c.reason and c.read() == []


def test_nvml_mig_instances() -> None:
    fake = mig_aware(FakeNvml([FakeGpu(mig=True)]))
    (r,) = NvmlCollector(fake).read(now=0.0)
    assert [m["uuid"] for m in r.extra["mig"]] == ["MIG-1000", "MIG-1001"]
    assert r.extra["mig"][0]["mem_total_bytes"] == 18 << 30


def test_real_nvml_absent_here_is_a_state() -> None:
    c = NvmlCollector()
    if c.state == "missing":
        assert c.read() == [] and "NVML" in c.reason


# --- AMD, XRT, DFL (fake sysfs trees) ----------------------------------------------------


def amd_tree(root: Path) -> Path:
    dev = root / "devices/pci0000:00/0000:03:00.0"
    write(dev / "vendor", "0x1002")
    write(dev / "gpu_busy_percent", "73")
    write(dev / "mem_info_vram_used", str(3 << 30))
    write(dev / "mem_info_vram_total", str(16 << 30))
    write(dev / "hwmon/hwmon4/power1_average", "95000000")  # µW
    write(dev / "hwmon/hwmon4/energy1_input", "5000000")  # µJ
    write(dev / "hwmon/hwmon4/temp1_input", "61000")  # m°C
    (root / "class/drm/card1").mkdir(parents=True)
    (root / "class/drm/card1/device").symlink_to(dev)
    (root / "class/drm/card1-DP-1").mkdir(parents=True)
    return dev


def test_amd_gpu_from_sysfs(tmp_path: Path) -> None:
    dev = amd_tree(tmp_path)
    c = AmdGpuCollector(tmp_path, amdsmi=None)
    c.smi = None
    (r,) = c.read(now=0.0)
    write(dev / "hwmon/hwmon4/energy1_input", "105000000")  # +100 J
    (r,) = c.read(now=1.0)
    assert r.kind == "gpu" and r.util == 0.73 and r.mem_total_bytes == 16 << 30
    assert r.power_w == 95.0 and r.temp_c == 61.0
    assert r.energy_j == 100.0 and r.energy_source == "hwmon"
    assert r.extra["pci_bus_id"] == "0000:03:00.0"


def test_xrt_sysfs_power_from_rails(tmp_path: Path) -> None:
    xmc = tmp_path / "bus/pci/drivers/xocl/0000:65:00.1/xmc.u.1048576"
    write(xmc / "xmc_12v_pex_vol", "12000")  # mV
    write(xmc / "xmc_12v_pex_curr", "3000")  # mA -> 36 W
    write(xmc / "xmc_12v_aux_vol", "12100")
    write(xmc / "xmc_12v_aux_curr", "1000")  # 12.1 W
    write(xmc / "xmc_fpga_temp", "55")
    c = FpgaCollector(tmp_path, pyxrt=None)
    c.xrt = None
    c.read(now=0.0)
    (r,) = c.read(now=2.0)
    assert r.kind == "fpga" and r.power_w == pytest.approx(48.1)
    assert (
        r.energy_j == pytest.approx(96.2)
        and r.energy_source == "xrt"
        and r.energy_method == "power"
    )
    assert r.temp_c == 55.0 and "utilisation" in r.note


def test_dfl_hwmon(tmp_path: Path) -> None:
    hw = tmp_path / "bus/dfl/devices/dfl_dev.1/hwmon/hwmon7"
    write(hw / "power1_input", "42000000")
    write(hw / "temp1_input", "48500")
    (r,) = FpgaCollector(tmp_path, pyxrt=None).read(now=0.0)
    assert r.power_w == 42.0 and r.temp_c == 48.5 and r.energy_j == 0.0


# --- OpenCL (real PoCL, and a fake NVIDIA device mapped by PCI bus id) -------------------


def test_opencl_pocl_maps_to_cpu() -> None:
    c = OpenCLCollector()
    cpu = CpuCollector().read()
    readings = c.read(cpu)
    pocl = [r for r in readings if "Portable Computing Language" in r.name]
    assert pocl and pocl[0].extra["maps_to"] == "cpu" and pocl[0].kind == "opencl"
    assert pocl[0].util == cpu[0].util


def test_a_second_pocl_is_not_a_second_device() -> None:
    """pip's PoCL inside pyopencl and the distribution's both offer the CPU: the newest
    is the one device (the real one here: setup installs Debian's beside pip's)."""

    def plat(name: str, version: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(name=name, version=version)

    pip = plat("Portable Computing Language", "OpenCL 3.0 PoCL 3.0-rc2  Linux, Release")
    debian = plat("Portable Computing Language ", "OpenCL 3.0 PoCL 3.1+debian  Linux")
    nvidia = plat("NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4.131")
    assert platforms_in_use([pip, nvidia, debian]) == [nvidia, debian]
    assert platforms_in_use([debian, pip]) == [debian]
    assert platforms_in_use([nvidia]) == [nvidia]
    real = OpenCLCollector().devices
    assert sum(d.platform == "Portable Computing Language" for d in real) == 1


def test_opencl_gpu_maps_to_nvml_by_pci_bus_id() -> None:
    dev = OpenCLDevice(
        "NVIDIA CUDA", "NVIDIA H200", "gpu", "NVIDIA", 132, 141 << 30, "0000:17:00.0"
    )
    c = OpenCLCollector(lambda: [dev])
    gpus = NvmlCollector(FakeNvml()).read(now=0.0)
    (r,) = c.read(gpus)
    assert r.extra["maps_to"] == "gpu:0" and r.util == 0.5 and r.power_w == 310.0


# --- the sweep ------------------------------------------------------------------------------


def test_sweep_rate_and_sources(tmp_path: Path) -> None:
    sweep = DeviceSweep(sysfs=tmp_path, nvml=FakeNvml())
    a = sweep.read(now=0.0)
    assert sweep.read(now=0.3) is a  # faster than 1 Hz: the last sweep again
    b = sweep.read(now=1.0)
    assert b is not a
    kinds = {r.kind for r in b}
    assert {"cpu", "gpu", "opencl"} <= kinds
    states = {s.name: s.state for s in sweep.sources()}
    assert states["nvml"] == "ok" and states["rapl"] == "missing" and states["fpga"] == "missing"


def test_one_listing_serves_every_collector_of_a_process_for_a_while() -> None:
    """The agent's sessions each made a collector, and each collector a ~1 s child:
    one listing now serves them all (and one that failed, for a shorter while)."""
    calls: list[float] = []
    dev = OpenCLDevice("PoCL", "cpu", "cpu", "x", 2, 1 << 30, None)

    def lister() -> list[OpenCLDevice]:
        calls.append(time.monotonic())
        time.sleep(0.05)  # collectors made meanwhile wait for this one
        return [dev]

    shared = SharedListing(lister, ttl_s=60.0)
    collectors = [OpenCLCollector(shared) for _ in range(6)]
    assert all(c.devices == [dev] for c in collectors)
    assert len(calls) == 1
    stale = SharedListing(lister, ttl_s=0.0)
    stale(), stale()
    assert len(calls) == 3  # past its time, listed again

    def failing() -> list[OpenCLDevice]:
        calls.append(time.monotonic())
        raise RuntimeError("listing OpenCL devices took over 30 s")

    broken = SharedListing(failing, failed_ttl_s=60.0)
    assert [OpenCLCollector(broken).reason for _ in range(3)] == [
        "listing OpenCL devices took over 30 s"
    ] * 3
    assert len(calls) == 4
