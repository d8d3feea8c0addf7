"""The C parts, declared here (setuptools still calls `[tool.setuptools.ext-modules]`
experimental and warned at every install): the task API's USDT sites, and the OpenCL
layer that times a launched command's kernels. The layer is a plain shared library the
OpenCL loader opens (never imported); optional, so that a machine without the OpenCL
headers still installs, and `opencl:` specs there say the layer is missing."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("adaptyst_top.placement._sdt", sources=["src/adaptyst_top/placement/_sdt.c"]),
        Extension(
            "adaptyst_top.collectors.probes.kinds._opencl_layer",
            sources=["src/adaptyst_top/collectors/probes/kinds/opencl_layer.c"],
            include_dirs=["src/adaptyst_top/placement/include"],
            extra_compile_args=["-fvisibility=hidden"],
            optional=True,
        ),
    ]
)
