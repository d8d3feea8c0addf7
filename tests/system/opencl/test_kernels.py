"""The demo's kernels: every device computes what numpy computes, and inputs go to a
device once, not on every run (the advisor's transfer model counts on it). OpenCL runs
for real on PoCL; the CUDA path against a fake cupy with cupy's names."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from adaptyst_top.placement.kernels import (
    CudaDevice,
    available_devices,
    make_inputs,
    opencl_devices,
    run_cpu,
)

CASES = [
    ("spmv", 3000, 0.01),
    ("gemm", 40, 1.0),
    ("reduce", 100_000, 1.0),
    ("logistic", 10_003, 1.0),  # not a multiple of 8: the scalar tail too
]


def close(a: object, b: object) -> bool:
    return bool(np.allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-3))


@pytest.mark.parametrize(("kind", "n", "density"), CASES)
def test_every_device_computes_what_numpy_computes(kind: str, n: int, density: float) -> None:
    inp = make_inputs(kind, n, density)
    devices = available_devices()
    assert "opencl:0" in devices, "PoCL's OpenCL CPU device should be here"
    for name, run in devices.items():
        assert close(run(inp), run_cpu(inp)), name


def test_opencl_inputs_go_to_the_device_once() -> None:
    dev = opencl_devices()[0]
    inp = make_inputs("spmv", 2000, 0.01)
    for _ in range(5):
        dev.run(inp)
    assert dev.resident.uploads == 4  # indptr, indices, values, x: once each
    dev.run(make_inputs("spmv", 2000, 0.01, seed=1))  # a new input: its own copies
    assert dev.resident.uploads == 8


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """cupy and cupyx.scipy.sparse over numpy: a "device" array is a copy."""
    calls = types.SimpleNamespace(asarray=0, csr=0)

    def asarray(a: object) -> np.ndarray:
        calls.asarray += 1
        return np.array(a, copy=True)

    def csr_matrix(m: object) -> object:
        calls.csr += 1
        return m.copy()  # type: ignore[attr-defined]

    cupy = types.ModuleType("cupy")
    cupy.asarray = asarray  # type: ignore[attr-defined]
    cupy.asnumpy = np.asarray  # type: ignore[attr-defined]
    cupy.sum = np.sum  # type: ignore[attr-defined]
    cupy.float64 = np.float64  # type: ignore[attr-defined]
    for name in ("empty_like", "subtract", "multiply"):
        setattr(cupy, name, getattr(np, name))
    sparse = types.ModuleType("cupyx.scipy.sparse")
    sparse.csr_matrix = csr_matrix  # type: ignore[attr-defined]
    cupyx, scipy_ = types.ModuleType("cupyx"), types.ModuleType("cupyx.scipy")
    cupyx.scipy = scipy_  # type: ignore[attr-defined]
    scipy_.sparse = sparse  # type: ignore[attr-defined]
    for name, mod in [
        ("cupy", cupy),
        ("cupyx", cupyx),
        ("cupyx.scipy", scipy_),
        ("cupyx.scipy.sparse", sparse),
    ]:
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


def test_cuda_path_computes_and_keeps_inputs_resident(fake_cupy: types.SimpleNamespace) -> None:
    dev = CudaDevice()
    for kind, n, density in CASES:
        inp = make_inputs(kind, n, density)
        for _ in range(3):
            assert close(dev.run(inp), run_cpu(inp)), kind
    # spmv: the matrix and x; gemm: a and b; reduce, logistic: the vector. Once each.
    assert (fake_cupy.csr, fake_cupy.asarray) == (1, 5)


WARM_CHECK = """
import sys
from pathlib import Path
from adaptyst_top.placement.kernels import make_inputs, opencl_devices

def compiled():
    return {str(p) for p in Path(sys.argv[1]).rglob("*") if p.is_file()}

dev = opencl_devices()[0]
before = compiled()
for kind, n in (("logistic", 10**6), ("logistic", 20_000), ("spmv", 3000), ("spmv", 50_000),
                ("gemm", 96), ("gemm", 256), ("reduce", 2 * 10**6)):
    dev.run(make_inputs(kind, n, 0.004))
print(len(before), len(compiled() - before))
"""


def test_a_task_s_first_run_on_pocl_compiles_nothing(tmp_path: Path) -> None:
    """PoCL compiles a kernel at its first launch per work-group size and grid class
    (35-800 ms): a first run that carried it would make the device look 10x slower than
    it is. The device compiles everything when it is made, so that the runs of every
    size add nothing to PoCL's cache (a fresh one: POCL_CACHE_DIR)."""
    env = {**os.environ, "POCL_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", WARM_CHECK, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert int(out[0]) > 0, "the warm-up compiled nothing into the cache"
    assert int(out[1]) == 0, f"{out[1]} kernels compiled at a task's first run"
