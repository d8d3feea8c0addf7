"""The one C extension (the task API's USDT sites), declared here: setuptools still
calls `[tool.setuptools.ext-modules]` experimental and warned at every install."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("adaptyst_top.placement._sdt", sources=["src/adaptyst_top/placement/_sdt.c"])
    ]
)
