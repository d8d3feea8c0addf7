"""The probe table at small sizes: a column shows whole or not at all, and the vertical
scrollbar takes its own cells (it once covered the last column: `1.58 m`, `p9`)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from adaptyst_top.tui.rows import PROBE_COLUMNS
from adaptyst_top.tui.widgets.fast_table import FastTable

CELLS = {
    "state": "attached",
    "kind": "uprobe",
    "target": "workload",
    "name": "some_function_name",
    "count": "1.2M",
    "rate": "40.0k",
    "mean": "98.8 µs",
    "p50": "97.1 µs",
    "p95": "1.20 ms",
    "p99": "1.58 ms",
    "max": "12.3 ms",
    "cost": "1.5 µs",
}


class One(App[None]):
    def compose(self) -> ComposeResult:
        yield FastTable(PROBE_COLUMNS, id="t")


async def test_more_rows_than_fit_keep_every_shown_value_whole() -> None:
    app = One()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(FastTable)
        for i in range(40):  # more than fit: a vertical scrollbar
            table.upsert(f"r{i}", dict(CELLS, name=f"fn_{i}"))
        await pilot.pause()
        width = table.scrollable_content_region.width
        assert width < table.size.width  # the scrollbar has its cells
        assert not table.show_horizontal_scrollbar  # no bar over the last row either
        header = table.render_line(0).text
        row = table.render_line(1).text
        assert len(row) == width and len(header) == width
        shown = [c for c, _ in table.columns_for(width)]
        for column in shown:
            assert CELLS[column.key] in row or column.key == "name", (column.key, row)
        assert header.rstrip().endswith(shown[-1].label)


async def test_flexible_columns_share_the_room_by_what_their_text_needs() -> None:
    class Devices(App[None]):
        def compose(self) -> ComposeResult:
            from adaptyst_top.tui.rows import DEVICE_COLUMNS

            yield FastTable(DEVICE_COLUMNS, id="d")

    note = "- energy unmeasured: no powercap RAPL zones (virtual machine or no driver)"
    app = Devices()
    async with app.run_test(size=(200, 10)) as pilot:
        table = app.query_one(FastTable)
        table.upsert("cpu", {"name": "AMD EPYC", "energy": note, "util": "50%"})
        await pilot.pause()
        widths = {c.key: w for c, w in table.columns_for(table.text_width)}
        assert widths["energy"] >= len(note)  # the note, whole: the short name needs little
        assert note in table.render_line(1).text


async def test_a_sorted_table_repaints_only_a_row_whose_place_holds() -> None:
    """A sorted pane whose figures change every second (the devices pane sorts by its
    order) once sent its whole self through Textual's compositor on every change."""
    app = One()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(FastTable)
        table.set_sort("count")
        for i in range(3):
            table.upsert(f"r{i}", dict(CELLS, count=str(i)), {"count": i})
        await pilot.pause()
        whole: list[object] = []
        real = table.refresh

        def refresh(*regions: object, **kw: object) -> object:
            if not regions:
                whole.append(kw)
            return real(*regions, **kw)

        table.refresh = refresh  # type: ignore[method-assign]
        table.upsert("r1", dict(CELLS, count="1", p99="2.00 ms"), {"count": 1})
        await pilot.pause()
        assert whole == [] and table.order == ["r0", "r1", "r2"]
        assert "2.00 ms" in table.render_line(2).text
        table.upsert("r0", dict(CELLS, count="9"), {"count": 9})  # now it moves
        await pilot.pause()
        assert table.order == ["r1", "r2", "r0"] and len(whole) == 1
