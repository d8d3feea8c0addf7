"""The C parts, declared here (setuptools still calls `[tool.setuptools.ext-modules]`
experimental and warned at every install): the task API's USDT sites, the OpenCL layer
that times a launched command's kernels, and the CUDA injection library that reads
CUPTI's kernel records. The last two are plain shared libraries a loader or driver
opens (never imported); optional, so that a machine without their headers still
installs, and `opencl:` or `cuda:` specs there say the library is missing."""

import glob
import importlib.util
import os
import shutil
import subprocess
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Where CUPTI's and the CUDA driver API's headers are (the build's own requirements,
# pyproject.toml, or a CUDA toolkit): each header the injection library includes, and
# the folder that holds it.
_CUDA_HEADERS = {
    "cupti_activity.h": ("nvidia.cuda_cupti", "extras/CUPTI/include"),
    "cuda.h": ("nvidia.cuda_runtime", "include"),
    "crt/host_defines.h": ("nvidia.cuda_nvcc", "include"),
}


def _package_includes(package: str) -> list[str]:
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        return []
    places = (spec.submodule_search_locations or []) if spec else []
    return [os.path.join(p, "include") for p in places]


def cuda_includes() -> list[str]:
    """The folders that hold the headers, or [] when any is missing."""
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    found = []
    for header, (package, in_home) in _CUDA_HEADERS.items():
        places = [*_package_includes(package), os.path.join(home, in_home)]
        hit = next((p for p in places if os.path.exists(os.path.join(p, header))), None)
        if hit is None:
            return []
        found.append(hit)
    return found


# The BPF programs (`*.bpf.c`), compiled once here to CO-RE objects that libbpf loads on
# the node: no compiler and no kernel headers there. Without clang or libbpf's headers
# the objects are not built and those kinds go through bcc's run-time compile instead.
_BPF_SOURCES = "src/adaptyst_top/**/*.bpf.c"


def _bpf_clang() -> str | None:
    names = [os.environ.get("BPF_CLANG", ""), "clang", *(f"clang-{v}" for v in range(21, 13, -1))]
    return next((shutil.which(n) for n in names if n and shutil.which(n)), None)


class BuildWithBpf(build_ext):
    """The C extensions, then every `*.bpf.c` to a `.bpf.o` beside it (in the build
    folder, or in the sources for an editable install)."""

    def run(self) -> None:
        super().run()
        clang = _bpf_clang()
        if clang is None or not os.path.exists("/usr/include/bpf/bpf_helpers.h"):
            print("warning: no clang or libbpf headers: BPF objects not built (bcc instead)")
            return
        multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
        for src in glob.glob(_BPF_SOURCES, recursive=True):
            rel = os.path.relpath(src, "src")
            out = src if self.inplace else os.path.join(self.build_lib, rel)
            out = out[: -len(".c")] + ".o"
            os.makedirs(os.path.dirname(out), exist_ok=True)
            cmd = [clang, "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-Wall"]
            cmd += [f"-I/usr/include/{multiarch}", "-c", src, "-o", out]
            subprocess.run(cmd, check=True)
            # The DWARF goes; BTF (types, line info for the verifier's messages) stays.
            strip = shutil.which("llvm-strip") or shutil.which(
                os.path.basename(clang).replace("clang", "llvm-strip")
            )
            if strip:
                subprocess.run([strip, "-g", out], check=True)


_SDT_INCLUDE = "src/adaptyst_top/placement/include"
_KINDS = "src/adaptyst_top/collectors/probes/kinds"
_cuda = cuda_includes()

setup(
    cmdclass={"build_ext": BuildWithBpf},
    ext_modules=[
        Extension("adaptyst_top.placement._sdt", sources=["src/adaptyst_top/placement/_sdt.c"]),
        Extension(
            "adaptyst_top.collectors.probes.kinds._python_layer",
            sources=[f"{_KINDS}/python_layer.c"],
            depends=[f"{_KINDS}/layer_common.h"],
            include_dirs=[_SDT_INCLUDE],
            extra_compile_args=["-fvisibility=hidden"],
            optional=True,
        ),
        Extension(
            "adaptyst_top.collectors.probes.kinds._opencl_layer",
            sources=[f"{_KINDS}/opencl_layer.c"],
            depends=[f"{_KINDS}/layer_common.h"],
            include_dirs=[_SDT_INCLUDE],
            extra_compile_args=["-fvisibility=hidden"],
            optional=True,
        ),
        *(
            [
                Extension(
                    "adaptyst_top.collectors.probes.kinds._cuda_inject",
                    sources=[f"{_KINDS}/cuda_inject.c", f"{_KINDS}/cupti_open.c"],
                    depends=[f"{_KINDS}/layer_common.h", f"{_KINDS}/cupti_open.h"],
                    include_dirs=[_SDT_INCLUDE, *_cuda],
                    extra_compile_args=["-fvisibility=hidden"],
                    libraries=["dl", "pthread"],
                    optional=True,
                )
            ]
            if _cuda
            else []
        ),
    ],
)
