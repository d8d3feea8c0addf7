"""A placed task for trying the Dask placement out (the tests and bench/dask_eval.py):
the logistic map of placement/kernels.py, numpy on the CPU, pyopencl on the worker's
first OpenCL device (PoCL's on a node without a GPU), cupy on its NVIDIA GPU. Its
answers agree across them (kernels.py: the map settles on a stable cycle)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from adaptyst_top.dask.placed import PlacementError, placed
from adaptyst_top.placement.kernels import (
    CudaDevice,
    Inputs,
    OpenCLDevice,
    opencl_devices,
    run_cpu,
)

_device: OpenCLDevice | None = None
_cuda: CudaDevice | None = None
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


def cuda_device() -> CudaDevice:
    """This process's GPU through cupy, set up on first use."""
    global _cuda
    with _lock:
        if _cuda is None:
            try:
                _cuda = CudaDevice()
            except Exception as e:  # no cupy, no driver, no GPU: cupy's own errors vary
                why = next(iter(str(e).splitlines()), "") or type(e).__name__
                raise PlacementError(f"no CUDA device on this worker: {why}") from None
        return _cuda


def warm(kind: str = "opencl") -> bool:
    """Set the accelerator up now, its kernels built and run once (client.run(warm,
    KIND) on the workers offering KIND), as an application does before its first task."""
    if kind == "cuda":
        logistic_cuda(np.full(64, 0.5, dtype=np.float32))
    else:
        opencl_device()
    return True


def logistic_cpu(x: np.ndarray) -> Any:
    return run_cpu(Inputs("logistic", len(x), None, x))


def logistic_opencl(x: np.ndarray) -> Any:
    return opencl_device().run(Inputs("logistic", len(x), None, x))


def logistic_cuda(x: np.ndarray) -> Any:
    return cuda_device().run(Inputs("logistic", len(x), None, x))


VARIANTS = {"cpu": logistic_cpu, "opencl": logistic_opencl, "cuda": logistic_cuda}
logistic = placed("logistic", VARIANTS, size=len)
