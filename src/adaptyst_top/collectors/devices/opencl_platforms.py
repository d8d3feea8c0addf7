"""Which OpenCL platforms offer targets. A pure rule over pyopencl's platforms, shared
by the inventory (collectors) and the placement's kernels, so that opencl:N names the
same device in the snapshot, in the advisor and in the application."""

from __future__ import annotations

import re
from typing import Any

POCL = "Portable Computing Language"


def _pocl_version(plat: Any) -> tuple[int, ...]:
    m = re.search(r"PoCL (\d+)\.(\d+)", str(getattr(plat, "version", "")))
    return (int(m[1]), int(m[2])) if m else (0, 0)


def platforms_in_use(platforms: list[Any]) -> list[Any]:
    """The platforms whose devices are targets: PoCL may be installed twice (pip's wheel
    inside pyopencl and the distribution's package), offering the same CPU twice; only
    the newest PoCL counts, as it knows the most CPUs (pip's PoCL 3.0, on LLVM 14,
    builds no kernel on a Zen 5: "unknown target CPU 'generic'"; Debian's 3.1 does).
    The inventory and the placement's kernels both number devices over this list, so
    that opencl:N is the same device in both."""
    pocl = [p for p in platforms if str(p.name).strip() == POCL]
    keep = max(pocl, key=_pocl_version, default=None)
    return [p for p in platforms if p is keep or str(p.name).strip() != POCL]
