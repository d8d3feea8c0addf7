"""Two placed Dask tasks beside dask_eval's logistic map, each with a plain Python CPU
variant and an OpenCL one (pyopencl, the worker's first device: PoCL here) that builds
its context and program on its first call, as real OpenCL code does (nothing warmed
ahead): a small input class the CPU wins (a launch and two copies cost more than the
work) and a large one the OpenCL variant wins by 10x and more.

- poly:    a degree-8 polynomial of each element (Horner);
- stencil: eight passes of a 3-point average over the array.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from adaptyst_top.dask.placed import PlacementError, placed

COEFFS = (0.3, -0.2, 0.11, 0.05, -0.07, 0.02, 0.01, -0.004, 0.002)
PASSES = 8

_SOURCE = """
__kernel void poly(__global const float *x, __global float *y) {{
    int i = get_global_id(0);
    float v = x[i], acc = {c8!r};
    {horner}
    y[i] = acc;
}}
__kernel void smooth(__global const float *x, __global float *y, int n) {{
    int i = get_global_id(0);
    float l = x[i > 0 ? i - 1 : i], r = x[i < n - 1 ? i + 1 : i];
    y[i] = (l + x[i] + r) / 3.0f;
}}
""".format(
    c8=COEFFS[-1],
    horner="\n    ".join(f"acc = acc * v + {c!r}f;" for c in reversed(COEFFS[:-1])),
)

_lock = threading.Lock()
_cl: tuple[Any, Any, dict[str, Any]] | None = None  # context, queue, kernels: first use


def _opencl() -> tuple[Any, Any, dict[str, Any]]:
    """This process's OpenCL context, queue and kernels: built by the first call (a
    worker runs one task at a time here, so one kernel object each is enough)."""
    global _cl
    with _lock:
        if _cl is None:
            import pyopencl as cl

            devices = [d for p in cl.get_platforms() for d in p.get_devices()]
            if not devices:
                raise PlacementError("no OpenCL device on this worker")
            ctx = cl.Context([devices[0]])
            program = cl.Program(ctx, _SOURCE).build()
            kernels = {k: cl.Kernel(program, k) for k in ("poly", "smooth")}
            _cl = (ctx, cl.CommandQueue(ctx), kernels)
        return _cl


def poly_cpu(x: np.ndarray) -> np.ndarray:
    out = []
    for v in x.tolist():
        acc = COEFFS[-1]
        for c in reversed(COEFFS[:-1]):
            acc = acc * v + c
        out.append(acc)
    return np.asarray(out, dtype=np.float32)


def _on_device(x: np.ndarray, run: Any) -> np.ndarray:
    """X copied to the device, RUN(queue, kernels, input, scratch) launching the work and
    naming the buffer its result is in, that buffer copied back."""
    import pyopencl as cl

    ctx, queue, kernels = _opencl()
    mf = cl.mem_flags
    a = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(x))
    b = cl.Buffer(ctx, mf.READ_WRITE, x.nbytes)
    out = np.empty_like(x)
    cl.enqueue_copy(queue, out, run(queue, kernels, a, b))
    return out


def poly_opencl(x: np.ndarray) -> np.ndarray:
    def run(queue: Any, kernels: dict[str, Any], a: Any, b: Any) -> Any:
        kernels["poly"](queue, (len(x),), None, a, b)
        return b

    return _on_device(x, run)


def stencil_cpu(x: np.ndarray) -> np.ndarray:
    v = x.tolist()
    n = len(v)
    for _ in range(PASSES):
        v = [(v[max(i - 1, 0)] + v[i] + v[min(i + 1, n - 1)]) / 3.0 for i in range(n)]
    return np.asarray(v, dtype=np.float32)


def stencil_opencl(x: np.ndarray) -> np.ndarray:
    def run(queue: Any, kernels: dict[str, Any], a: Any, b: Any) -> Any:
        for _ in range(PASSES):
            kernels["smooth"](queue, (len(x),), None, a, b, np.int32(len(x)))
            a, b = b, a
        return a

    return _on_device(x, run)


POLY = {"cpu": poly_cpu, "opencl": poly_opencl}
STENCIL = {"cpu": stencil_cpu, "opencl": stencil_opencl}
poly = placed("poly", POLY, size=len)
stencil = placed("stencil", STENCIL, size=len)
