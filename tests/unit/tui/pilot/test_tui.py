"""The monitor under Textual's pilot: every key, on a replayed real recording (and, as
root, on a live probed target)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.widgets import Input

from adaptyst_top.runtime.listing import Candidate
from adaptyst_top.runtime.sources import ReplaySource
from adaptyst_top.tui.app import MonitorApp
from adaptyst_top.tui.screens.detail import DetailScreen, histogram_rows
from adaptyst_top.tui.screens.help import HelpScreen
from adaptyst_top.tui.screens.picker import AddProbeScreen
from adaptyst_top.tui.screens.prompt import PromptScreen
from adaptyst_top.tui.widgets.fast_table import FastTable
from tests.support.paths import DATA, REPO

RECORDING = DATA / "recording.jsonl"


def replay_app(steps: int = 3) -> MonitorApp:
    return MonitorApp(ReplaySource(RECORDING), interval=1.0, autoplay=False)


async def loaded(pilot, steps: int = 3) -> None:  # type: ignore[no-untyped-def]
    for _ in range(steps):
        pilot.app.step()
    await pilot.pause()


def probe_names(app: MonitorApp) -> list[str]:
    table = app.query_one("#probes", FastTable)
    return [table.rows[k].cells["name"] for k in table.order]


async def test_replay_fills_every_pane() -> None:
    app = replay_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert "fast_fn" in probe_names(app)
        assert "spmv · task_begin..task_end" in probe_names(app)
        devices = app.query_one("#devices", FastTable)
        # PoCL runs on the CPU: one row, the OpenCL device named in it, never a second row.
        assert list(devices.rows) == ["cpu"]
        assert "OpenCL: pthread" in devices.rows["cpu"].cells["name"]
        header = app.query_one("#header").text
        assert "replay of recording.jsonl" in header and "probes cost" in header


async def test_sort_and_reverse() -> None:
    app = replay_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("s")  # by calls, most first
        table = app.query_one("#probes", FastTable)
        counts = [table.rows[k].sort["count"] for k in table.order]
        assert counts == sorted(counts, reverse=True)
        await pilot.press("S")
        counts = [table.rows[k].sort["count"] for k in table.order]
        assert counts == sorted(counts)


async def test_filter() -> None:
    app = replay_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("slash")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press(*"task", "enter")
        assert all("task" in n for n in probe_names(app)) and len(probe_names(app)) == 2
        # It opens empty (it opened pre-filled: typing added to the old filter), the
        # filter in force said in its place.
        await pilot.press("slash")
        prompt = app.screen.query_one(Input)
        assert prompt.value == "" and "'task'" in str(prompt.placeholder)
        await pilot.press(*"fast", "enter")
        assert probe_names(app) == ["fast_fn"]
        await pilot.press("slash", "enter")  # empty clears
        assert len(probe_names(app)) == 7


async def test_pause_and_step_and_interval() -> None:
    app = replay_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot, 1)
        await pilot.press("p")
        assert app.paused and "PAUSED" in app.query_one("#header").text
        assert app.snap is not None
        t = app.snap.t
        await pilot.press("full_stop")  # one step while paused
        assert app.snap.t > t
        await pilot.press("plus")
        assert app.interval == 2.0
        await pilot.press("minus", "minus")
        assert app.interval == 0.5
        await pilot.press("greater_than_sign")
        assert app.speed == 2.0


async def test_detail_help_and_back() -> None:
    app = replay_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("down", "enter")
        assert isinstance(app.screen, DetailScreen)
        await pilot.pause()
        text = str(app.screen.query_one("#detail-hist").render())
        assert "◀ raw p50" in text  # the histogram is raw, and its markers say so
        title = str(app.screen.query_one("#detail-title").render())
        assert "(net; raw p50 " in title
        await pilot.press("escape")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = str(app.screen.query_one("#help Static").render())
        from adaptyst_top.tui.screens.help import NOTATION, TABLES

        for _title, columns in TABLES:  # every column of every pane, explained
            for c in columns:
                assert c.help and f"  {c.label}" in shown and c.help in shown, c.label
        for mark, _what in NOTATION:
            assert f"  {mark}" in shown
        for word in ("n~2^", "untried", "in noise", "holding", "explore", "<1 µs"):
            assert word in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_replay_speed_keys_live_say_what_they_do() -> None:
    """`<` and `>` did nothing live and said nothing (issue 74's newcomer)."""
    app = replay_app()
    app.source.read_only = False  # type: ignore[misc]  # as a live source is
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot, 1)
        await pilot.press("greater_than_sign")
        assert app.speed == 1.0 and "replay's speed" in app.status and "+ and -" in app.status


async def test_replay_is_read_only_and_advisor_keys() -> None:
    app = replay_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        for key in ("space", "a", "d"):
            await pilot.press(key)
            await pilot.pause()
            assert "read-only" in app.status
        await pilot.press("m")
        assert app.status == "no advice to apply"
        await pilot.press("M")
        assert app.advisor_mode == "auto" and "auto" in str(
            app.query_one("#advisor-state").render()
        )


async def test_replay_end_and_quit() -> None:
    app = replay_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot, 9)
        assert "replay ended" in app.status
        assert all(
            app.query_one("#probes", FastTable).rows[k].cells["state"] == "ended"
            for k in app.query_one("#probes", FastTable).order
        )
        await pilot.press("q")
    assert app.return_code == 0


async def test_small_terminal_keeps_the_key_columns() -> None:
    app = replay_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        table = app.query_one("#probes", FastTable)
        shown = [c.key for c, _ in table.columns_for(table.size.width)]
        assert {"state", "name", "count", "rate", "p99"} <= set(shown)
        assert sum(w + 1 for _, w in table.columns_for(table.size.width)) <= table.size.width + 1


def test_histogram_rows_merge_when_many() -> None:
    few = histogram_rows([[100, 5], [101, 7]])
    assert [c for _, _, c in few] == [5, 7]
    many = histogram_rows([[i, 1] for i in range(100, 160)])
    assert len(many) <= 24 and sum(c for _, _, c in many) == 60


# --- snapshots (SVG, pytest-textual-snapshot) --------------------------------------------


def test_snapshot_main_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await loaded(pilot, 4)

    assert snap_compare(replay_app(), terminal_size=(80, 24), run_before=run_before)


def test_snapshot_detail(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await loaded(pilot, 4)
        await pilot.press("down", "enter")
        await pilot.pause()

    assert snap_compare(replay_app(), terminal_size=(100, 30), run_before=run_before)


def test_snapshot_ascii(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await loaded(pilot, 4)

    app = MonitorApp(ReplaySource(RECORDING), interval=1.0, autoplay=False, ascii=True)
    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


# --- live, as root: keys that change the probes ---------------------------------------------


BAD_LINES = [
    b"\xff\xfe not utf-8\n",
    b"[1, 2, 3]\n",
    b"null\n",
    b'{"t": "soon", "probes": []}\n',
    b'{"t": 1.0, "probes": 5}\n',
    b'{"t": 1.0, "probes": [{"name": "x", "count": "many"}]}\n',
    b'{"t": 1.0, "devices": [{"id": "cpu", "util": NaN}]}\n',
    b'{"t": Infinity}\n',
    b'{"t": 1.0, "probes": [{"name": "x", "hist": [[1]]}]}\n',
]


async def test_replay_skips_malformed_lines_and_says_how_many(tmp_path: Path) -> None:
    good = RECORDING.read_bytes().splitlines(keepends=True)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(good[0] + b"".join(BAD_LINES) + b"".join(good[1:]))
    app = MonitorApp(ReplaySource(mixed), interval=1.0, autoplay=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot, 2)
        assert f"skipped {len(BAD_LINES)} malformed line(s)" in app.status
        assert "fast_fn" in probe_names(app)
        await loaded(pilot, 9)
        assert "replay ended" in app.status


def test_a_file_that_is_no_recording_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    for content in (b"\xff\xfe\n", b"[]\n", b"", b'{"t": NaN}\n'):
        f = tmp_path / "bad.jsonl"
        f.write_bytes(content)
        r = subprocess.run(
            [sys.executable, "-m", "adaptyst_top.cli.start", "replay", str(f)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 1 and "not an adaptyst-top recording" in r.stderr
        assert len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
async def test_no_number_is_cut_and_one_row_per_physical_device(size: tuple[int, int]) -> None:
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        devices = app.query_one("#devices", FastTable)
        assert list(devices.rows) == ["cpu"]  # PoCL's OpenCL device is the CPU's view
        probes = app.query_one("#probes", FastTable)
        width = probes.text_width
        numeric = {"count", "rate", "mean", "p50", "p95", "p99", "max", "cost"}
        for y, key in enumerate(probes.order[: size[1] // 3], start=1):
            line = probes.render_line(y).text
            assert len(line) == width
            for column, _w in probes.columns_for(width):
                if column.key in numeric:
                    value = probes.rows[key].cells[column.key]
                    assert value in line, (size, column.key, value, line)


H200_RECORDING = REPO / "results" / "h200" / "record.jsonl"


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
async def test_a_real_h200_recording_shows_whole_figures(size: tuple[int, int]) -> None:
    """What `record` wrote on an H200 under a cupy GEMM load (scripts/gpu_check.sh):
    the GPU is one row beside the CPU, its figures whole in its line, and the load's
    process under it."""
    app = MonitorApp(ReplaySource(H200_RECORDING), interval=1.0, autoplay=False)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot, 12)  # under load: 100%, ~640 W, 5.3 GiB
        devices = app.query_one("#devices", FastTable)
        assert devices.order == ["cpu", "gpu:0", "gpu:0/479"]
        process = devices.render_line(3).text
        assert process.startswith(" └ 479 ") and "SM " in process
        width = devices.text_width
        shown = [c.key for c, _w in devices.columns_for(width)]
        assert {"name", "util", "power", "energy"} <= set(shown)
        line = devices.render_line(1 + devices.order.index("gpu:0")).text
        assert len(line) == width and "NVIDIA H200" in line
        for key in ("util", "mem", "power", "energy"):
            if key in shown:
                value = devices.rows["gpu:0"].cells[key]
                assert value and value in line, (size, key, value, line)
        assert "100%" in line and " W" in line and "(nvml)" in line


async def test_the_detail_screen_shows_its_history_at_100x30() -> None:
    """A histogram of many rows once pushed the rate and p99 history below the fold."""
    from textual.app import App

    from adaptyst_top.snapshot import Latency, ProbeEntry

    wide = ProbeEntry(
        group=0, id=0, spec="uprobe:./a:f", name="f", kind="uprobe", state="attached",
        count=24_000, raw=Latency(1e5, 1e5, 1e6, 1e7, 10.0, 1e9),
        hist=tuple((b, 1000) for b in range(40, 420, 16)),  # 24 buckets over 8 decades
    )  # fmt: skip
    app: App[None] = App()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = DetailScreen("k")
        await app.push_screen(screen)
        screen.show(wide, [1.0, 2.0, 3.0], [1e5, 2e5, None])
        await pilot.pause()
        for part in ("#detail-title", "#detail-history", "#detail-hist"):
            region = screen.query_one(part).region
            assert region.height > 0 and region.bottom <= 30 - 1, (part, region)  # footer
        assert "calls/s" in str(screen.query_one("#detail-history").render())


def test_a_histogram_of_many_decades_fits_the_rows_it_has() -> None:
    many = [[i, 1] for i in range(0, 1000, 3)]
    assert len(histogram_rows(many, 8)) <= 8


async def test_the_picker_marks_refused_functions_and_never_picks_them() -> None:
    from textual.app import App
    from textual.widgets import OptionList

    offered = [
        Candidate("uprobe:/lib/libc.so.6:memset", "/lib/libc.so.6:memset", "starts with AVX-512"),
        Candidate("uprobe:/lib/libc.so.6:memcpy", "/lib/libc.so.6:memcpy"),
        Candidate("uprobe:./app:_ZN6solver4stepEi", "./app:solver::step(int)"),
    ]
    picked: list[str | None] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(AddProbeScreen(lambda: offered), picked.append)

    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        options = app.screen.query_one("#picker-list", OptionList)
        marked = options.get_option_at_index(0)
        assert marked.disabled and "AVX-512" in str(marked.prompt)
        await pilot.press(*"mem", "enter")  # the first one that may be probed
        await pilot.pause(0.1)
        assert picked == ["uprobe:/lib/libc.so.6:memcpy"]
        app.push_screen(AddProbeScreen(lambda: offered), picked.append)
        await pilot.pause(0.3)
        await pilot.press(*"solver::step", "enter")  # found by the name the source spells
        await pilot.pause(0.1)
        assert picked[-1] == "uprobe:./app:_ZN6solver4stepEi"


# --- the advisor pane, from a recording of the demo with moves -----------------------

ADVISOR_RECORDING = DATA / "advisor-recording.jsonl"


def advisor_app() -> MonitorApp:
    return MonitorApp(ReplaySource(ADVISOR_RECORDING), interval=1.0, autoplay=False)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_advisor(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await loaded(pilot, 4)

    assert snap_compare(advisor_app(), terminal_size=size, run_before=run_before)


def test_snapshot_task_plots(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await loaded(pilot, 4)
        pilot.app.set_focus(pilot.app.advisor.tasks)
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(advisor_app(), terminal_size=(120, 40), run_before=run_before)


async def test_the_advisor_pane_shows_tasks_and_the_move_log_from_a_recording() -> None:
    app = advisor_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, 4)
        snap = app.snap
        assert snap is not None and snap.advisor is not None and snap.advisor.moves
        tasks = app.query_one("#tasks", FastTable)
        assert set(tasks.rows) == {t.task for t in snap.tasks}
        moves = app.query_one("#moves", FastTable)
        newest = moves.rows[moves.order[0]].cells
        last = snap.advisor.moves[-1]
        assert newest["task"] == last.task and last.to in newest["move"]
        app.set_focus(tasks)
        await pilot.press("enter")
        await pilot.pause()
        from adaptyst_top.tui.screens.task_plot import TaskScreen

        assert isinstance(app.screen, TaskScreen)
        assert app.screen.task_name == tasks.selected_key
        # The axes in the units the other screens use: no raw 370727.6 or 0.04614.
        from textual_plotext import PlotextPlot

        plot = app.screen.query_one("#time-plot", PlotextPlot)
        for size in ((100, 30), (130, 45)):  # a resize draws it again (it once crashed)
            await pilot.resize_terminal(*size)
            await pilot.pause()
            drawn = plot.plt.uncolorize(plot.plt.build())
            assert re.search(r"\d (ns|µs|ms|s)\b", drawn), drawn
            assert not re.search(r"\d\.\d{4,}|\d{6,}", drawn), drawn
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TaskScreen)


# --- joules beside latencies (a real recording: held_fn spins, napped_fn sleeps) ----------

ENERGY_RECORDING = DATA / "energy-recording.jsonl"


def energy_app() -> MonitorApp:
    return MonitorApp(ReplaySource(ENERGY_RECORDING), interval=1.0, autoplay=False)


async def test_joules_per_call_beside_the_latencies_and_dropped_first_when_narrow() -> None:
    app = energy_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, 9)
        table = app.query_one("#probes", FastTable)
        shown = [c.key for c, _ in table.columns_for(table.size.width)]
        assert "energy" in shown
        cells = {table.rows[k].cells["name"]: table.rows[k].cells["energy"] for k in table.order}
        assert cells["held_fn"].endswith(" J") or cells["held_fn"].endswith("mJ")
        assert cells["napped_fn"].endswith("mJ") or cells["napped_fn"].endswith("µJ")
    async with energy_app().run_test(size=(80, 24)) as pilot:
        await loaded(pilot, 9)
        table = pilot.app.query_one("#probes", FastTable)
        assert "energy" not in [c.key for c, _ in table.columns_for(table.size.width)]


def test_snapshot_energy_120x40(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await loaded(pilot, 9)

    assert snap_compare(energy_app(), terminal_size=(120, 40), run_before=run_before)


def test_snapshot_energy_detail(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await loaded(pilot, 9)
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(energy_app(), terminal_size=(120, 40), run_before=run_before)


async def test_ascii_mode_writes_only_ascii_in_every_pane() -> None:
    """--ascii is for terminals that cannot show more: the panes' own units, separators,
    cuts and sort marks (µs, ·, …, ▼) were still written."""
    from adaptyst_top.tui.widgets.text_line import TextLine

    app = MonitorApp(ReplaySource(RECORDING), interval=1.0, autoplay=False, ascii=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot, 4)
        shown = []
        for table in app.query(FastTable):
            shown += [table.render_line(y).text for y in range(table.size.height)]
        shown += [line.render_line(0).text for line in app.query(TextLine) if line.size.height]
        assert any("us" in text for text in shown)  # latencies are there, in ASCII
        assert [t for t in shown if not t.isascii()] == []


async def test_the_filter_border_counts_the_matching_rows() -> None:
    """It counted every row, matches or not."""
    app = MonitorApp(ReplaySource(RECORDING), interval=1.0, autoplay=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot, 4)
        table = app.query_one("#probes", FastTable)
        total = len(table.rows)
        table.set_filter("_fn")
        await pilot.pause(0.1)
        matching = len(table.order)
        assert 0 < matching < total
        assert table.border_subtitle == f"{matching} of {total} rows match _fn"


async def test_power_and_energy_over_time_a_key_away() -> None:
    """`e`: each device's power and the energy it used over the session, from the
    snapshots already shown (an H200 under load: ~640 W)."""
    from textual_plotext import PlotextPlot

    from adaptyst_top.tui.screens.power_plot import PowerScreen

    app = MonitorApp(ReplaySource(H200_RECORDING), interval=1.0, autoplay=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, 12)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, PowerScreen)
        history = app.power_history
        gpu = next(d for d in history.devices if d.startswith("gpu"))
        times, watts = history.power(gpu)
        assert len(times) == 12 and times == sorted(times) and max(watts) > 100
        snaps = ReplaySource(H200_RECORDING)
        shown = [snaps.snapshot() for _ in range(12)]
        first, last = (
            next(d.energy_j for d in s.devices if d.id == gpu) for s in (shown[0], shown[-1])
        )
        assert first is not None and last is not None
        assert history.energy(gpu)[1][-1] == pytest.approx(last - first)
        title = str(app.screen.query_one("#power-title").render())
        assert "NVIDIA H200" in title and " W now" in title and "(nvml)" in title
        app.step()  # a new snapshot reaches the open screen
        await pilot.pause()
        assert len(history.power(gpu)[0]) == 13
        for size in ((90, 30), (140, 45)):  # drawn again on a resize
            await pilot.resize_terminal(*size)
            await pilot.pause()
            drawn = app.screen.query_one("#power-plot", PlotextPlot)
            text = drawn.plt.uncolorize(drawn.plt.build())
            assert re.search(r"\d+ W", text) and re.search(r"\d+:\d\d", text), text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, PowerScreen)


async def test_the_learners_tasks_show_their_spread_and_its_band(tmp_path: Path) -> None:
    """A recording of the learner's tasks (what the monitor now carries): the pane says
    each device's time with its one sigma, and the task screen draws the predicted
    median and the band either side, at any size, with nothing but finite numbers."""
    import json

    from adaptyst_top.placement.learned_advisor import LearnedAdvisor
    from adaptyst_top.placement.learned_view import learned_entries
    from adaptyst_top.snapshot import Snapshot

    adv = LearnedAdvisor(["cpu", "opencl:0"])
    lines = []
    for i, size in enumerate((1_000, 10_000, 100_000, 1_000_000)):
        for d, per_item in (("cpu", 1e-8), ("opencl:0", 1e-9)):
            t = 1e-6 + size * per_item + (5e-5 if d != "cpu" else 0.0)
            for _ in range(3):
                adv.observe("spmv", d, (size.bit_length() - 1, 2), t, 20, size=size)
        adv.set_current("spmv", "cpu")
        snap = Snapshot(t=float(i + 1), host="n", tasks=learned_entries(adv))
        lines.append(json.dumps(snap.to_json()))
    path = tmp_path / "learner.jsonl"
    path.write_text("\n".join(lines) + "\n")
    app = MonitorApp(ReplaySource(path), interval=1.0, autoplay=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, 4)
        tasks = app.query_one("#tasks", FastTable)
        cells = tasks.rows[tasks.order[0]].cells
        assert "±" in cells["times"] and cells["confidence"] != "-", cells
        app.set_focus(tasks)
        await pilot.press("enter")
        await pilot.pause()
        from textual_plotext import PlotextPlot

        plot = app.screen.query_one("#time-plot", PlotextPlot)
        for size in ((80, 24), (130, 45)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            drawn = plot.plt.uncolorize(plot.plt.build())
            assert "predicted" in drawn and re.search(r"\d (ns|µs|ms|s)\b", drawn), drawn
        title = str(app.screen.query_one("#task-title").render())
        assert "crossovers:" in title and "±" in title, title


async def test_a_pending_specs_detail_follows_the_row_it_became() -> None:
    """`u`, `esc`, `enter` within a second opened a pending spec's detail, which then said
    "this probe is gone" while the row it became counted (issue 74's newcomer)."""
    from adaptyst_top.snapshot import ProbeRef

    app = replay_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        table = app.probes
        p = table.entries[table.order[0]]
        screen = DetailScreen(ProbeRef(p.group, None, None).text)  # opened while pending
        app.push_screen(screen)
        await pilot.pause()
        app._update_detail(screen)
        first = next(k for k in table.order if table.entries[k].group == p.group)
        assert screen.key == first
        title = str(screen.query_one("#detail-title").render())
        assert "gone" not in title and table.entries[first].name in title
