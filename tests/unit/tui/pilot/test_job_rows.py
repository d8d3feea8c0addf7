"""A job's rows in the monitor: the Imbal column, and R from merged to per rank to per
node and back, on a real recording of an MPI run."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from adaptyst_top.runtime.sources import ReplaySource
from adaptyst_top.tui.app import MonitorApp
from adaptyst_top.tui.widgets.fast_table import FastTable
from tests.support.paths import DATA

RECORDING = DATA / "mpi-ranks-recording.jsonl"


@contextlib.asynccontextmanager
async def replayed(path: Path, steps: int) -> AsyncIterator[tuple[MonitorApp, Any]]:
    """The monitor on PATH's recording, STEPS snapshots in: (the app, its pilot)."""
    app = MonitorApp(ReplaySource(path), interval=1.0, autoplay=False)
    async with app.run_test(size=(120, 30)) as pilot:
        for _ in range(steps):
            app.step()
        await pilot.pause()
        yield app, pilot


async def test_r_switches_merged_per_rank_per_node() -> None:
    async with replayed(RECORDING, 6) as (app, pilot):
        table = app.query_one("#probes", FastTable)

        def names() -> list[str]:
            return sorted(table.rows[k].cells["name"] for k in table.order)

        assert names() == ["MPI_Allreduce", "compute"]
        assert "imbalance" in [c.key for c in table.columns]
        imbal = {table.rows[k].cells["name"]: table.rows[k].cells["imbalance"] for k in table.order}
        assert imbal["compute"].endswith(" r1") and imbal["MPI_Allreduce"].endswith(" r0")
        await pilot.press("R")
        await pilot.pause()
        assert names() == [
            "MPI_Allreduce · r0",
            "MPI_Allreduce · r1",
            "compute · r0",
            "compute · r1",
        ]
        assert "per rank" in app.query_one("#status").text
        await pilot.press("R")
        await pilot.pause()
        assert all("(2 ranks)" in n for n in names()) and len(names()) == 2
        await pilot.press("R")
        await pilot.pause()
        assert names() == ["MPI_Allreduce", "compute"]


async def test_the_header_counts_probes_whichever_view_splits_them() -> None:
    async with replayed(RECORDING, 2) as (app, pilot):
        await pilot.press("R")  # per rank: 4 rows of 2 probes
        await pilot.pause()
        app.step()
        await pilot.pause()
        header = app.query_one("#header").text
        assert "t=2s" in header and "2 probes cost" in header, header


async def test_rows_of_a_single_process_have_no_imbal_column() -> None:
    async with replayed(DATA / "recording.jsonl", 3) as (app, _pilot):
        table = app.query_one("#probes", FastTable)
        assert "imbalance" not in [c.key for c in table.columns]
