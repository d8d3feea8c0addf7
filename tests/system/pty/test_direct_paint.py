"""Lines painted straight to the terminal (tui/direct_paint.py) are the lines Textual's
compositor paints: the same cells, the same colours, nothing painted over a widget in
front. Checked in tmux, where the real driver runs."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

from adaptyst_top.tui.direct_paint import _cells, _uncovered
from adaptyst_top.tui.widgets.text_line import TextLine
from tests.support.paths import REPO
from tests.support.terminal import Terminal

APP = "tests.support.targets.paint_app"
SESSION = "adaptyst-paint"

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


TERM = Terminal(SESSION)


def capture(colours: bool = True) -> str:
    return TERM.screen(colours)


def wait_for(what: Callable[[str], bool], timeout: float = 30.0) -> str:
    return TERM.wait_for(what, timeout, step=0.1)


@pytest.fixture
def paint_app(tmp_path: Path) -> Iterator[Callable[[int, int], Path]]:
    def start(width: int, height: int) -> Path:
        counts = tmp_path / "counts"
        command = f"cd {REPO} && {sys.executable} -m {APP} {counts}; echo EXITED $?; sleep 30"
        TERM.start(command, width, height)
        return counts

    yield start
    TERM.kill()


@needs_tmux
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_what_is_painted_directly_is_what_textual_paints(
    paint_app: Callable[[int, int], Path], size: tuple[int, int]
) -> None:
    counts = paint_app(*size)
    wait_for(lambda s: _tick(s) >= 20)  # twenty rounds of rows, header and status
    painted = _freeze_and_compare_with_a_full_repaint()
    assert "function_0" in painted and "▆" not in painted.split("function_0")[0]
    TERM.keys("q")
    wait_for(lambda s: "EXITED 0" in s)
    direct, refresh = _counts(counts)
    # Header, status and table each round (20 rounds or more); through Textual only
    # the rounds before the first layout (3 paints each, one or two rounds here).
    assert direct >= 3 * 15 and refresh <= 9, (direct, refresh)
    # A round's three paints reach the writer thread as one write: a round is one write,
    # and Textual's own writes (its first screens, the full repaint above) are few.
    writes, rounds = _count(counts, "frozen_after_writes"), _count(counts, "rounds")
    print("writes:", writes, "rounds:", rounds)
    assert rounds >= 20 and writes <= rounds + 10, (writes, rounds)


@needs_tmux
def test_a_notification_in_front_stays_whole(paint_app: Callable[[int, int], Path]) -> None:
    paint_app(100, 30)
    wait_for(lambda s: _tick(s) >= 3)
    TERM.keys("n")
    wait_for(lambda s: "a notification over the table" in s)
    start = _tick(wait_for(lambda s: _tick(s) > 0))
    wait_for(lambda s: _tick(s) >= start + 10)  # ten rounds painted beside it
    assert "a notification over the table" in capture(colours=False)
    _freeze_and_compare_with_a_full_repaint()


@needs_tmux
@pytest.mark.parametrize(
    "keys", ["b", "bt", "g", "gg"], ids=["blurred", "focused-again", "background", "back-again"]
)
def test_lines_painted_after_a_style_change_wear_the_new_style(
    paint_app: Callable[[int, int], Path], keys: str
) -> None:
    """A paint keeps what it read of the widget (where it is, its styles' layout) from
    one paint to the next: after the table loses the focus (its border and cursor change
    colour) or gets another background, and maybe goes back, the rows painted directly
    are still the rows Textual paints."""
    paint_app(100, 30)
    for key in keys:
        start = _tick(wait_for(lambda s: _tick(s) > 0))
        TERM.keys(key)
        wait_for(lambda s, n=start: _tick(s) >= n + 5)  # rows painted in the new style
    _freeze_and_compare_with_a_full_repaint()


@needs_tmux
def test_a_refresh_pending_in_the_same_handler_is_not_lost(
    paint_app: Callable[[int, int], Path],
) -> None:
    """A row removed (the whole table to repaint) and a row changed (painted directly)
    in one handler: the table shows the order after the removal."""
    paint_app(100, 30)
    wait_for(lambda s: _tick(s) >= 3)
    TERM.keys("f")
    wait_for(lambda s: "frozen at tick" in s)
    TERM.keys("d")
    text = wait_for(lambda s: "dropped" in s)
    first = next(ln for ln in text.splitlines() if "function_" in ln)
    assert "function_1 " in first and "dropped" in first
    assert "function_0 " not in text
    time.sleep(0.5)
    painted = capture()
    TERM.keys("r")
    time.sleep(1.0)
    assert capture() == painted


def _freeze_and_compare_with_a_full_repaint() -> str:
    """Freeze the figures, then have Textual paint every cell anew: the screen must not
    change. The screen, as it was painted."""
    TERM.keys("f")
    wait_for(lambda s: "frozen at tick" in s)
    time.sleep(0.5)
    painted = capture()
    TERM.keys("r")
    time.sleep(1.0)
    assert capture() == painted
    return painted


def _tick(screen: str) -> int:
    """The round the header shows (0 before the first)."""
    words = screen.split("tick ", 1)
    return int(words[1].split()[0]) if len(words) == 2 and words[1][:1].isdigit() else 0


def _counts(path: Path) -> tuple[int, int]:
    return _count(path, "direct"), _count(path, "refresh")


def _count(path: Path, what: str) -> int:
    words = path.read_text().split()
    return int(words[words.index(what) + 1])


def test_the_spans_left_between_widgets_in_front() -> None:
    assert _uncovered(0, 10, []) == [(0, 10)]
    assert _uncovered(0, 10, [(8, 10)]) == [(0, 8)]  # a scrollbar on the right edge
    assert _uncovered(0, 10, [(3, 5), (4, 7)]) == [(0, 3), (7, 10)]
    assert _uncovered(0, 10, [(0, 12)]) == []
    assert _uncovered(2, 10, [(0, 3), (9, 20)]) == [(3, 9)]


def test_the_textual_names_it_reads_are_there() -> None:
    """Textual is pinned; a release that renames these fails here, not on a screen."""
    for name in ("_driver", "_batch_count", "_running", "_closed", "_sync_available"):
        assert hasattr(App(), name), name
    screen = Screen()
    assert hasattr(screen, "_layout_required")
    assert hasattr(screen._compositor, "visible_widgets")
    widget = Widget()
    for name in ("_layout_required", "_repaint_required", "_dirty_regions"):
        assert hasattr(widget, name), name
    assert isinstance(widget._layout_cache.clear, Callable)  # type: ignore[arg-type]
    cache = widget._styles_cache
    for name in ("_cache", "_width", "_dirty_lines", "get_inner_outer"):
        assert hasattr(cache, name), name


class Lines(App[None]):
    CSS = "#h { background: $panel; text-style: bold; } #s { color: $warning; }"

    def compose(self) -> ComposeResult:
        yield TextLine(id="h")
        yield TextLine(id="s")


TEXTS = [
    "vm  │  pid 1 (x)  │  54 probes cost 26.8% of target CPU (budget 2%) OVER  │  1s",
    "probe overhead 23.9% of the target's CPU time exceeds the budget of 2.0%; costliest",
    "",
    "x" * 80,
    "a " + "y" * 70,
    "[b]not markup[/b] [/]",
    "日本語 wide 日本語 wide 日本語 wide 日本語 wide",
]


async def test_a_text_line_reads_as_textual_would_wrap_it() -> None:
    """One line of text is a segment, not Textual's wrapped Content (15x cheaper), ended
    where Textual's wrap ends it: at a whole word, never inside a number."""
    app = Lines()
    async with app.run_test(size=(40, 4)) as pilot:
        for text in TEXTS:
            for line in app.query(TextLine):
                line.text = text
                await pilot.pause()
                ours = line.render_line(0)
                line._dirty_regions.add(line.size.region)
                line._layout_cache.clear()
                theirs = Widget.render_line(line, 0)
                assert [(s.text, s.style and s.style.clear_meta_and_links()) for s in ours] == [
                    (s.text, s.style and s.style.clear_meta_and_links()) for s in theirs
                ], text


def test_a_line_cut_around_a_widget_in_front_is_textual_s_crop() -> None:
    """Cells in front (a scrollbar, a notification) are cut out of a line as segments;
    every cut, wide characters included, is Strip.crop's, segment for segment."""
    edge, text = Style(bold=True), Style(color="red")
    line = [Segment("│", edge), Segment("p99 1.58 ms 世界", text), Segment("  ", edge)]
    line.append(Segment("│", edge))
    n = sum(s.cell_length for s in line)
    for x0 in range(n):
        for x1 in range(x0 + 1, n + 1):
            mine = [(s.text, s.style) for s in _cells(line, x0, x1) if s.text]
            theirs = [(s.text, s.style) for s in Strip(line, n).crop(x0, x1) if s.text]
            assert mine == theirs, (x0, x1)
