"""A placed task for trying the Dask placement out (the tests and bench/dask_eval.py):
the logistic map of placement/kernels.py, numpy on the CPU, pyopencl on the worker's
first OpenCL device (PoCL's on a node without a GPU). Its answers agree across the
two (kernels.py: the map settles on a stable cycle)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from adaptyst_top.dask.placed import PlacementError, placed
from adaptyst_top.placement.kernels import Inputs, OpenCLDevice, opencl_devices, run_cpu

_device: OpenCLDevice | None = None
_lock = threading.Lock()


def opencl_device() -> OpenCLDevice:
    """This process's OpenCL device, its program built on first use (warm() builds it
    ahead, as an application builds its kernels before its first task)."""
    global _device
    with _lock:
        if _device is None:
            found = opencl_devices()
            if not found:
                raise PlacementError("no OpenCL device that builds the kernels on this worker")
            _device = found[0]
        return _device


def warm() -> bool:
    """Build the OpenCL program now (client.run(warm) on the workers offering opencl)."""
    opencl_device()
    return True


def logistic_cpu(x: np.ndarray) -> Any:
    return run_cpu(Inputs("logistic", len(x), None, x))


def logistic_opencl(x: np.ndarray) -> Any:
    return opencl_device().run(Inputs("logistic", len(x), None, x))


logistic = placed("logistic", {"cpu": logistic_cpu, "opencl": logistic_opencl}, size=len)
