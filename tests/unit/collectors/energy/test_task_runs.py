"""A placed task's run in joules: its time at its device's power, an OpenCL device's
taken from the physical device it maps to, nothing where no power is known."""

from __future__ import annotations

from adaptyst_top.collectors.energy.task_runs import device_power, run_joules
from adaptyst_top.snapshot import DeviceReading

CPU = DeviceReading("cpu", "cpu", "CPU", power_w=50.0)
POCL = DeviceReading("opencl:0", "opencl", "pthread-cpu", extra={"maps_to": "cpu"})
GPU = DeviceReading("gpu:0", "gpu", "H100")  # no power read


def test_a_run_is_its_time_at_its_devices_power() -> None:
    assert run_joules("cpu", [CPU], 0.002) == 0.1


def test_an_opencl_device_draws_its_physical_devices_power() -> None:
    assert device_power("opencl:0", [CPU, POCL]) == 50.0
    assert run_joules("opencl:0", [CPU, POCL], 0.5) == 25.0


def test_no_power_no_joules() -> None:
    assert run_joules("gpu:0", [GPU], 1.0) is None
    assert run_joules("fpga:0", [CPU], 1.0) is None
    assert run_joules("cpu", [DeviceReading("cpu", "cpu", "CPU", power_w=float("inf"))], 1) is None
