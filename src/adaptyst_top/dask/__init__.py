"""Placement across nodes on Dask (the `dask` extra):

    from adaptyst_top.dask import DevicePlacement, placed

    spmv = placed("spmv", {"cpu": spmv_numpy, "opencl": spmv_pyopencl}, size=lambda A, x: A.nnz)
    client.register_plugin(DevicePlacement(objective="time"))
    futures = client.map(spmv, matrices, vectors)  # or spmv.map(client, matrices, vectors)

Each call runs on the device kind, and so the workers, that the scheduler's advisor
chose for its input size, learned from the runs themselves (docs/placement.md). The
scheduler never runs size(): spmv.map/spmv.submit run it on the client and send the
size with the call; a plain client.map is sized from what the scheduler holds."""

from __future__ import annotations

from typing import Any

from adaptyst_top.dask.placed import PlacedTask as PlacedTask
from adaptyst_top.dask.placed import PlacementError as PlacementError
from adaptyst_top.dask.placed import placed as placed
from adaptyst_top.dask.plugin import PLUGIN_NAME
from adaptyst_top.dask.plugin import DevicePlacement as DevicePlacement


def _report(dask_scheduler: Any) -> dict[str, Any] | None:
    plugin = dask_scheduler.plugins.get(PLUGIN_NAME)
    return plugin.report() if plugin is not None else None


def placement_report(client: Any) -> dict[str, Any]:
    """The scheduler's DevicePlacement report (DevicePlacement.report)."""
    report: dict[str, Any] | None = client.run_on_scheduler(_report)
    if report is None:
        raise PlacementError(
            "no DevicePlacement on this cluster: client.register_plugin(DevicePlacement())"
        )
    return report
