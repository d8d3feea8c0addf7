"""python:FILE:FUNC: every call of the Python functions whose qualified name matches the
glob FUNC, defined in a .py file matching FILE (a path or a glob over paths), counted
and timed from entry to return, for a command the monitor launches.

The command runs with the tool's hook first on its PYTHONPATH (python_hook/
sitecustomize.py, which then runs the one it stands in front of): it times the calls of
the functions the probes name (sys.monitoring from 3.12: other functions pay nothing
after their first call; the profile hook before) and hands them over to the Python layer
(python_layer.c) 64 at a time, whose adaptyst_py:timed site the probe reads in the kernel;
device_layer says how a row is made of them (here the "device" is the interpreter, on
the CPU). A row's name is the function's qualified name (device_layer.row_name)."""

from __future__ import annotations

import os
import re
from types import MappingProxyType

from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.kinds.base import PlanContext
from adaptyst_top.collectors.probes.kinds.device_layer import TIMED, DeviceLayerKind
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import Key, ProbeSpec, ProbeSpecError

LAYER_MODULE = "adaptyst_top.collectors.probes.kinds._python_layer"
PROVIDER = "adaptyst_py"
PROBES_ENV, LAYER_ENV, PATH_ENV = "ADAPTYST_PY_PROBES", "ADAPTYST_PY_LAYER", "PYTHONPATH"
CONTROL_ENV = "ADAPTYST_PY_CONTROL"
HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_hook")
_FILE = re.compile(r"[^\t\n\0]{1,4096}")
# A qualified name's characters (identifiers are Unicode), and the glob's.
FUNC = re.compile(r"[\w.<>*?\[\]!]{1,512}")


class Python(DeviceLayerKind):
    name = "python"
    shape = "python:FILE:FUNC"
    syntax = "python:FILE:FUNC"
    what = "exact calls and latency of Python functions, for a launched command"
    module = LAYER_MODULE
    provider = PROVIDER
    # A call timed by the hook (python_hook/sitecustomize.py), handed over in a batch:
    # bench_python_calls, what the hook adds to a call (3.12, sys.monitoring: 1,562 ns;
    # before 3.12 the profile hook).
    timed_class = "python-call"
    counted_class = timed_class
    cost_classes = MappingProxyType({timed_class: ClassCost(1600.0, 0.0, "default")})
    device = "Python"
    noun = "Python layer"
    host_time = True
    # Every call is timed; a time the program handed over past a day is counted only
    # (bpf/module.h's file_batch): the means are over the timed ones.
    sampled_latency = True
    missing = "this install has no Python layer (built with sys/sdt.h: make setup)"

    def parse(self, spec: str, rest: str, body_start: int, key: Key) -> ProbeSpec:
        path, sep, func = rest.rpartition(":")
        if not sep or not _FILE.fullmatch(path):
            raise ProbeSpecError(spec, body_start, len(rest) or 1, f"expected {self.shape}")
        if not FUNC.fullmatch(func):
            at = body_start + len(path) + 1
            raise ProbeSpecError(spec, at, len(func) or 1, "bad function glob (a qualified name)")
        library = self.library()
        if library is None:
            raise ProbeSpecError(spec, 0, len(spec), self.missing)
        # A relative FILE is the launched command's: as its folder (the monitor's) names it.
        shown = path if path.startswith(("/", "*")) else os.path.abspath(path)
        return ProbeSpec(
            spec,
            "python",
            library,
            func=func,
            provider=PROVIDER,
            name=TIMED,
            arg=1,
            arg_type="str",
            file=shown,
            label=func,
            measures_latency=True,
        )

    def instead(self, ctx: PlanContext, spec: ProbeSpec) -> tuple[ProbeSpec, str] | None:
        if ctx.pid is not None:
            why = self.not_loaded_in(ctx, ctx.pid, spec.target, LAYER_ENV)
            if why is not None:
                raise ProbeError(
                    f"{spec.text}: PID {ctx.pid} was not started with this tool's Python "
                    "hook: exact Python calls need a command the monitor launches (-- CMD); "
                    "`--profile` shows its Python functions sampled"
                )
        return None

    def shown_target(self, target: str) -> str:
        return self.device

    def launch_env(
        self, env: dict[str, str], budget: float, spec: ProbeSpec | None = None
    ) -> dict[str, str]:
        if spec is None or spec.file is None:
            return {}
        return hook_env(env, [probe_line(spec)])


def probe_line(spec: ProbeSpec) -> str:
    """SPEC as the hook takes it: "FILE<TAB>FUNC"."""
    return f"{spec.file}\t{spec.func}"


def hook_env(env: dict[str, str], probes: list[str], control: str | None = None) -> dict[str, str]:
    """The variables that put the hook under a command (over ENV, its own): PROBES
    added to those ENV holds, and CONTROL ("FD:DEV:INODE"), the pipe later sets come on;
    nothing where this install has no Python layer."""
    library = Python.library()
    if library is None:
        return {}
    given = [p for p in env.get(PROBES_ENV, "").split("\n") if p]
    paths = [p for p in env.get(PATH_ENV, "").split(":") if p and p != HOOK_DIR]
    out = {
        PROBES_ENV: "\n".join(dict.fromkeys([*given, *probes])),
        LAYER_ENV: library,
        PATH_ENV: ":".join([HOOK_DIR, *paths]),
    }
    if control is not None:
        out[CONTROL_ENV] = control
    return out
