"""The demo's kernels, each on every device kind: `cpu` (numpy/scipy), `opencl:N`
(pyopencl: PoCL's CPU device here, GPU/FPGA OpenCL devices where present) and
`cuda` (cupy, when importable). Each returns its result as a numpy value so that
the devices' answers can be checked against each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from adaptyst_top.collectors.devices.opencl_platforms import platforms_in_use

OPENCL_SOURCE = r"""
__kernel void spmv(__global const int *ptr, __global const int *idx,
                   __global const float *val, __global const float *x,
                   __global float *y, const int rows) {
    int r = get_global_id(0);
    if (r >= rows) return;
    float acc = 0.0f;
    for (int k = ptr[r]; k < ptr[r + 1]; k++) acc += val[k] * x[idx[k]];
    y[r] = acc;
}

#define TILE 16
__kernel void gemm(__global const float *a, __global const float *b,
                   __global float *c, const int n) {
    __local float ta[TILE][TILE], tb[TILE][TILE];
    int row = get_global_id(1), col = get_global_id(0);
    int lr = get_local_id(1), lc = get_local_id(0);
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        ta[lr][lc] = (row < n && t + lc < n) ? a[row * n + t + lc] : 0.0f;
        tb[lr][lc] = (t + lr < n && col < n) ? b[(t + lr) * n + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++) acc += ta[lr][k] * tb[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < n && col < n) c[row * n + col] = acc;
}

__kernel void reduce(__global const float *x, __global float *partial,
                     __local float *scratch, const int n) {
    int gid = get_global_id(0), lid = get_local_id(0), gsize = get_global_size(0);
    float acc = 0.0f;
    for (int i = gid; i < n; i += gsize) acc += x[i];
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[get_group_id(0)] = scratch[0];
}

// The logistic map iterated in place: compute-heavy and element-wise (r = 3.2: a
// stable cycle, not chaos, so that rounding differences between devices die out). Eight lanes a
// work-item (vload8), so that PoCL's CPU device spreads it over every core in SIMD,
// where numpy makes a pass over memory per operation on one core.
__kernel void logistic(__global const float *x, __global float *y, const int n,
                       const int steps) {
    int i = get_global_id(0);
    if (i * 8 + 8 <= n) {
        float8 v = vload8(i, x);
        for (int k = 0; k < steps; k++) v = 3.2f * v * (1.0f - v);
        vstore8(v, i, y);
    } else {
        for (int j = i * 8; j < n; j++) {
            float v = x[j];
            for (int k = 0; k < steps; k++) v = 3.2f * v * (1.0f - v);
            y[j] = v;
        }
    }
}
"""
LOGISTIC_STEPS = 64  # iterations per element of the logistic kernel


@dataclass
class Inputs:
    """What one task works on; `size` is its work (nonzeros, n^2 elements, length)."""

    kind: str
    size: int
    feature: float | None
    data: Any


def make_inputs(kind: str, n: int, density: float = 0.01, seed: int = 0) -> Inputs:
    rng = np.random.default_rng(seed)
    if kind == "spmv":
        # CSR built directly (scipy.sparse.random materialises n*n indices).
        per_row = max(1, round(density * n))
        indices = rng.integers(0, n, size=n * per_row, dtype=np.int32)
        indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int32)
        values = rng.random(n * per_row, dtype=np.float32)
        m = sp.csr_matrix((values, indices, indptr), shape=(n, n))
        x = rng.random(n, dtype=np.float32)
        return Inputs(kind, n * per_row, density, (m, x))
    if kind == "gemm":
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        return Inputs(kind, n * n, None, (a, b))
    if kind == "reduce":
        return Inputs(kind, n, None, rng.random(n, dtype=np.float32))
    if kind == "logistic":
        # In (0.05, 0.95): the map stays in (0, 1) and every device computes the same.
        return Inputs(kind, n, None, 0.05 + 0.9 * rng.random(n, dtype=np.float32))
    raise ValueError(f"unknown kernel {kind!r}")


def run_cpu(inp: Inputs) -> Any:
    if inp.kind == "spmv":
        m, x = inp.data
        return m @ x
    if inp.kind == "gemm":
        a, b = inp.data
        return a @ b
    if inp.kind == "logistic":
        return logistic(np, inp.data.copy())
    return np.float64(np.sum(inp.data, dtype=np.float64))


def logistic(xp: Any, v: Any) -> Any:
    """LOGISTIC_STEPS steps of v = 3.2 v (1 - v), in place (numpy or cupy)."""
    tmp = xp.empty_like(v)
    for _ in range(LOGISTIC_STEPS):
        xp.subtract(np.float32(1.0), v, out=tmp)
        xp.multiply(v, tmp, out=v)
        xp.multiply(v, np.float32(3.2), out=v)
    return v


class Resident:
    """Inputs kept on a device between runs, as an application keeps them: the copy is
    paid once per input (the advisor's transfer cost), not per run. Bounded: past
    `limit` inputs it starts over."""

    def __init__(self, upload: Callable[[Any], Any], limit: int = 16) -> None:
        self.upload = upload
        self.limit = limit
        self.uploads = 0
        self._items: dict[tuple[int, int, int], tuple[Any, np.ndarray]] = {}

    def get(self, arr: np.ndarray, host: Any = None) -> Any:
        """The device copy of `host` (default: arr), keyed by the array `arr`."""
        key = (id(arr), arr.__array_interface__["data"][0], arr.nbytes)
        hit = self._items.get(key)
        if hit is not None:
            return hit[0]
        if len(self._items) >= self.limit:
            self._items.clear()
        dev = self.upload(arr if host is None else host)
        self.uploads += 1
        self._items[key] = (dev, arr)  # the array is kept so that its id stays unique
        return dev

    def clear(self) -> None:
        """Free every kept copy (the next run of each input uploads it again)."""
        self._items.clear()


LOCAL = 64  # work-items per work-group of the 1-D kernels: fixed, so compiled once


def padded(items: int) -> int:
    """A global size of at least ITEMS, in whole work-groups (the kernels skip the rest)."""
    return max(1, -(-items // LOCAL)) * LOCAL


class OpenCLDevice:
    """One OpenCL device with the program built once and buffers per call."""

    def __init__(self, device: Any, name: str) -> None:
        import pyopencl as cl

        self.cl = cl
        self.device = device
        self.name = name
        self.ctx = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.ctx)
        self.prog = cl.Program(self.ctx, OPENCL_SOURCE).build()
        self.k_spmv = cl.Kernel(self.prog, "spmv")
        self.k_gemm = cl.Kernel(self.prog, "gemm")
        self.k_reduce = cl.Kernel(self.prog, "reduce")
        self.k_logistic = cl.Kernel(self.prog, "logistic")
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        self.resident = Resident(lambda arr: cl.Buffer(self.ctx, flags, hostbuf=arr))
        self._warm()
        self.resident.clear()  # the warm-up's inputs are no task's
        self.resident.uploads = 0

    def forget(self) -> None:
        """Free the inputs kept on the device, as a new application starts with none."""
        self.resident.clear()

    def _warm(self) -> None:
        """Compile every kernel before a task's first run. PoCL compiles a kernel's code
        at its first launch for each work-group size, and again for grids past about
        32,768 work-items (35-800 ms here, then kept in its cache on disk). A task's
        first run that carries a compile looks like a device 10x slower than it is,
        and the advisor would not look at it again. With the work-group sizes fixed
        (LOCAL), a small run and an empty launch over a large grid (n = 0: every
        work-item returns at once) compile them for every input."""
        for kind, n in (("spmv", 64), ("gemm", 16), ("reduce", 64), ("logistic", 64)):
            self.run(make_inputs(kind, n, 0.1))
        one = self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, 64)
        big, zero = LOCAL * 4096, np.int32(0)
        self.k_spmv(self.queue, (big,), (LOCAL,), one, one, one, one, one, zero)
        self.k_logistic(self.queue, (big,), (LOCAL,), one, one, zero, zero)
        self.k_gemm(self.queue, (1024, 1024), (16, 16), one, one, one, zero)
        self.queue.finish()

    def _buf(self, arr: np.ndarray) -> Any:
        return self.resident.get(arr)

    def run(self, inp: Inputs) -> Any:
        cl, q = self.cl, self.queue
        mf = cl.mem_flags
        if inp.kind == "spmv":
            m, x = inp.data
            rows = m.shape[0]
            y = np.empty(rows, dtype=np.float32)
            y_buf = cl.Buffer(self.ctx, mf.WRITE_ONLY, y.nbytes)
            self.k_spmv(
                q,
                (padded(rows),),
                (LOCAL,),
                self._buf(m.indptr),
                self._buf(m.indices),
                self._buf(m.data),
                self._buf(x),
                y_buf,
                np.int32(rows),
            )
            cl.enqueue_copy(q, y, y_buf)
            return y
        if inp.kind == "gemm":
            a, b = inp.data
            n = a.shape[0]
            c = np.empty_like(a)
            c_buf = cl.Buffer(self.ctx, mf.WRITE_ONLY, c.nbytes)
            g = (n + 15) // 16 * 16
            self.k_gemm(q, (g, g), (16, 16), self._buf(a), self._buf(b), c_buf, np.int32(n))
            cl.enqueue_copy(q, c, c_buf)
            return c
        if inp.kind == "logistic":
            x = inp.data
            y = np.empty_like(x)
            y_buf = cl.Buffer(self.ctx, mf.WRITE_ONLY, y.nbytes)
            steps = np.int32(LOGISTIC_STEPS)
            self.k_logistic(
                q,
                (padded((x.size + 7) // 8),),
                (LOCAL,),
                self._buf(x),
                y_buf,
                np.int32(x.size),
                steps,
            )
            cl.enqueue_copy(q, y, y_buf)
            return y
        x = inp.data
        groups = 64
        partial = np.empty(groups, dtype=np.float32)
        p_buf = cl.Buffer(self.ctx, mf.WRITE_ONLY, partial.nbytes)
        self.k_reduce(
            q,
            (groups * LOCAL,),
            (LOCAL,),
            self._buf(x),
            p_buf,
            cl.LocalMemory(4 * LOCAL),
            np.int32(x.size),
        )
        cl.enqueue_copy(q, partial, p_buf)
        return np.float64(partial.sum(dtype=np.float64))


class CudaDevice:
    """cupy on an NVIDIA GPU (the GPU machine has it; never run in this VM)."""

    name = "cuda"

    def __init__(self) -> None:
        import cupy  # type: ignore[import-not-found]
        import cupyx.scipy.sparse as csp  # type: ignore[import-not-found]

        self.cp, self.csp = cupy, csp
        self.resident = Resident(cupy.asarray)
        self.matrices = Resident(csp.csr_matrix)  # keyed by the host matrix's values

    def forget(self) -> None:
        """Free the inputs kept on the GPU, as a new application starts with none."""
        self.resident.clear()
        self.matrices.clear()

    def run(self, inp: Inputs) -> Any:
        cp, dev = self.cp, self.resident.get
        if inp.kind == "spmv":
            m, x = inp.data
            return cp.asnumpy(self.matrices.get(m.data, m) @ dev(x))
        if inp.kind == "gemm":
            a, b = inp.data
            return cp.asnumpy(dev(a) @ dev(b))
        if inp.kind == "logistic":
            return cp.asnumpy(logistic(cp, dev(inp.data).copy()))
        return np.float64(float(cp.sum(dev(inp.data), dtype=cp.float64)))


def opencl_devices() -> list[OpenCLDevice]:
    """Every OpenCL device that builds the kernels, named as the inventory names it
    (opencl:N over collectors.opencl_platforms.platforms_in_use), so that the advisor's
    targets and the demo's devices are the same ones."""
    try:
        import pyopencl as cl

        found = [d for p in platforms_in_use(cl.get_platforms()) for d in p.get_devices()]
    except Exception:  # no ICD, no platform
        return []
    out: list[OpenCLDevice] = []
    for i, dev in enumerate(found):
        try:
            out.append(OpenCLDevice(dev, f"opencl:{i}"))
        except Exception:  # a device whose compiler rejects the program: not a target
            continue
    return out


def forget_inputs(devices: dict[str, Any]) -> None:
    """Every device of available_devices() frees the inputs it keeps. Between an
    evaluation's runs: a run that follows another starts as a new application does,
    its inputs on no device (and freeing 360 MB of buffers, 20 ms here, lands in no
    measured run)."""
    for runner in devices.values():
        forget = getattr(getattr(runner, "__self__", None), "forget", None)
        if forget is not None:
            forget()


def available_devices() -> dict[str, Any]:
    """name -> runner for every device here: cpu always, OpenCL and CUDA where present."""
    out: dict[str, Any] = {"cpu": run_cpu}
    out.update((d.name, d.run) for d in opencl_devices())
    try:
        cuda = CudaDevice()
        out["cuda"] = cuda.run
    except Exception:
        pass
    return out


def device_kinds(devices: dict[str, Any]) -> dict[str, str]:
    """name -> "gpu" | "cpu" for available_devices()'s devices, as the inventory
    describes them (the advisor's first looks, device_priors.py). The inventory's own
    type names are collectors' (placement meets collectors only through the snapshot)."""
    kinds = {}
    for name, runner in devices.items():
        owner = getattr(runner, "__self__", None)
        if isinstance(owner, CudaDevice):
            kinds[name] = "gpu"
        elif isinstance(owner, OpenCLDevice):
            gpu = bool(owner.device.type & owner.cl.device_type.GPU)
            kinds[name] = "gpu" if gpu else "cpu"
        else:
            kinds[name] = "cpu"
    return kinds
