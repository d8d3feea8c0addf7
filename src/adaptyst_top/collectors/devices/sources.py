"""Every device source, in the order the sweep reads them (the physical ones first:
OpenCL's devices are tied to what they found). A new source is one line here and its
module (docs/extending.md)."""

from __future__ import annotations

from adaptyst_top.collectors.devices.amd_gpu import AmdGpuSource
from adaptyst_top.collectors.devices.cpu import CpuSource
from adaptyst_top.collectors.devices.fpga import FpgaSource
from adaptyst_top.collectors.devices.nvml import NvmlSource
from adaptyst_top.collectors.devices.opencl import OpenCLSource
from adaptyst_top.collectors.devices.source import DeviceSource

SOURCES: tuple[type[DeviceSource], ...] = (
    CpuSource,
    NvmlSource,
    AmdGpuSource,
    FpgaSource,
    OpenCLSource,
)


def source_names() -> list[str]:
    """Every capability the sources' checks name, as `doctor` lists them."""
    return [name for s in SOURCES for name, _ in s.checks]
