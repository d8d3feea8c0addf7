"""CUDA without a GPU: CUPTI's fake (targets/cupti_fake.c, built as libcupti.so.12
against CUPTI's own headers from pip's nvidia-cuda-* packages, the test extra) and a
program on it (targets/cuda_app.c) that the tool launches like any CUDA program."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from tests.support.paths import TARGETS

# Each header the fake includes, and the package that holds it (as setup.py finds them).
_HEADERS = {
    "cupti_activity.h": "nvidia.cuda_cupti",
    "cuda.h": "nvidia.cuda_runtime",
    "crt/host_defines.h": "nvidia.cuda_nvcc",
}


def header_dirs() -> list[Path]:
    dirs = []
    for header, package in _HEADERS.items():
        spec = importlib.util.find_spec(package)
        places = (
            [Path(p) / "include" for p in (spec.submodule_search_locations or [])] if spec else []
        )
        hit = next((p for p in places if (p / header).exists()), None)
        if hit is None:
            raise RuntimeError(f"{header}: install the test extra ({package.replace('.', '-')})")
        dirs.append(hit)
    return dirs


def build_app(directory: Path, soname: str = "libcupti.so.12", runtime: str | None = None) -> Path:
    """The program, linked to the fake (SONAME) in DIRECTORY (its rpath), so that the
    tool's dlopen of that name finds the one the program loaded; with RUNTIME
    (libcudart.so.N), linked to an empty library of that name there too, as a program is
    to its CUDA runtime."""
    includes = [f"-I{d}" for d in header_dirs()]
    fake = directory / soname
    _gcc(
        "-O2",
        "-shared",
        "-fPIC",
        f"-Wl,-soname,{soname}",
        *includes,
        "-o",
        str(fake),
        str(TARGETS / "cupti_fake.c"),
        "-lpthread",
        "-ldl",
    )
    linked = [str(fake)]
    if runtime is not None:
        cudart = directory / runtime
        _gcc(
            "-shared", "-fPIC", f"-Wl,-soname,{runtime}", "-o", str(cudart), "-x", "c", "/dev/null"
        )
        linked.append(str(cudart))
    app = directory / "cuda_app"
    _gcc(
        "-O1",
        "-o",
        str(app),
        str(TARGETS / "cuda_app.c"),
        "-Wl,--no-as-needed",
        *linked,
        f"-Wl,-rpath,{directory}",
    )
    return app


def _gcc(*args: str) -> None:
    subprocess.run(["gcc", *args], check=True)
