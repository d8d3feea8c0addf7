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
    "imbalance": "1.31 r3",
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


async def test_columns_follow_their_growing_figures_at_every_size() -> None:
    """The layout rule: a figure wider than its column re-lays the table (the advisor's
    `Runs` at 2,109 drifted from its header), and free width goes to the column whose
    text is cut, not to blank names."""
    from adaptyst_top.tui.advisor_rows import TASK_COLUMNS

    class Tasks(App[None]):
        def compose(self) -> ComposeResult:
            yield FastTable(TASK_COLUMNS, id="t")

    for size in ((80, 24), (120, 40), (200, 50)):
        app = Tasks()
        async with app.run_test(size=size) as pilot:
            table = app.query_one(FastTable)
            cells = {
                "task": "spmv",
                "on": "cpu",
                "best": "opencl:0",
                "times": "cpu 1.2 ms · opencl:0 ~300 µs",
                "energy": "1.1 mJ",
                "gain": "+31%",
                "confidence": "0.91",
                "state": "settled",
                "runs": "9",
            }
            for runs in (9, 2109, 1_234_567, 123_456_789_012):
                cells = dict(cells, runs=f"{runs:,}", energy=f"{runs:,}.5 mJ")
                table.upsert("spmv", cells)
                await pilot.pause()
                width = table.text_width
                layout = table.columns_for(width)
                assert sum(w for _, w in layout) + len(layout) - 1 <= width
                header, row = table.render_line(0).text, table.render_line(1).text
                for column, w in layout:
                    at = sum(x + 1 for _, x in layout[: layout.index((column, w))])
                    label = header[at : at + w].strip()
                    assert label == column.label, (size, column.key, header)
                    if width >= 110 or column.priority >= 7:
                        # every shown figure whole under its own header
                        assert cells[column.key] in row[at : at + w], (size, column.key, row)


async def test_a_log_shown_newest_first_keeps_its_newest_rows_in_view() -> None:
    """A replay's move log hid its 15 newest moves above the view: the cursor followed
    its row down as moves came in above it."""
    from adaptyst_top.tui.advisor_rows import MOVE_COLUMNS

    class Log(App[None]):
        def compose(self) -> ComposeResult:
            yield FastTable(MOVE_COLUMNS, id="m")

    app = Log()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(FastTable)
        table.set_sort("order", reverse=True)
        table.follow_head = True
        for i in range(40):
            table.upsert(f"m{i}", {"task": f"t{i}", "move": "cpu → gpu"}, sort={"order": i})
            await pilot.pause()
        assert table.cursor == 0 and table.selected_key == "m39"
        assert int(table.scroll_offset.y) == 0
        assert "t39" in table.render_line(1).text
        table.action_cursor(3)  # a user who moved down keeps the row they chose
        await pilot.pause()
        table.upsert("m40", {"task": "t40", "move": "cpu → gpu"}, sort={"order": 40})
        await pilot.pause()
        assert table.selected_key == "m36"
