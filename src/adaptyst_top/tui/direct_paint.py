"""Repaint a few lines of a widget straight to the terminal, past Textual's compositor.

Why: in Textual every repaint, however small, goes through the screen's update timer
and the compositor, and the compositor renders every line of every widget that the
union of the dirty regions touches. A monitor changes its header, a few probe rows
and its status line every second; their union is the whole screen, so each second
paid for all of it: 4.0-4.4 ms a refresh, most of the monitor's own CPU
(docs/data-flow.md).

Here a changed line is rendered by the widget's own style cache (border, padding,
colours and filters exactly as the compositor would have them) and written at the
widget's place on the screen, skipping the cells of any widget in front of it (its
scrollbar). The style cache keeps the new line, so whatever Textual repaints later
agrees with what is on the terminal.

When anything is not the plain case, paint_lines() returns False and the caller
refreshes as usual: another screen on top, a layout on its way, a batch update, the
widget not on screen, or a driver that is not a terminal (headless tests, inline).

Textual is pinned (pyproject.toml); the private names read here are checked by
tests/system/pty/test_direct_paint.py, which fails if a later Textual renames them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.color import ColorSystem
from rich.control import Control
from rich.segment import Segment
from rich.style import Style
from textual._ansi_sequences import SYNC_END, SYNC_START
from textual.app import App
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class _Block:
    """What a one_write block holds: the paints made in it, and the repaints to run at
    its end (see when_done)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.pending: list[Callable[[], object]] = []


_blocks: weakref.WeakKeyDictionary[App[Any], _Block] = weakref.WeakKeyDictionary()


@contextmanager
def one_write(app: App[Any]) -> Iterator[None]:
    """The direct paints made inside, and the repaints deferred in it (when_done), go to
    the terminal as one write when it ends.

    Each write is a hand-off to Textual's writer thread, which wakes for it; a refresh
    paints several widgets (header, tables, status line), and a thread's wake-up after
    a second asleep costs about as much as a paint here. Nothing of Textual's can
    write in between: the block runs on the UI thread and does not await."""
    if app in _blocks:
        yield  # an outer block writes it all
        return
    block = _blocks[app] = _Block()
    try:
        yield
    finally:
        try:
            while block.pending:  # run even after an error: a table waits on its repaint
                block.pending.pop(0)()
        finally:
            del _blocks[app]
            if block.out and not app._closed:
                _write(app, block.out)


def when_done(widget: Widget, repaint: Callable[[], object]) -> None:
    """REPAINT once the current handler is done with the widget: at the end of the
    one_write block it is in, so that its paints join that write, else after the
    handler (Textual's call_later)."""
    block = _blocks.get(widget.app)
    if block is not None:
        block.pending.append(repaint)
    else:
        widget.call_later(repaint)


class _Frame:
    """What painting a line of a widget needs and does not change from one paint to the
    next: where it is, what stands in front of it, how its styles lay out a line.
    Reading it from Textual walks the widget's ancestors and styles (about half of a
    paint); it is kept until Textual would render the widget anew itself."""

    def __init__(self, widget: Widget, visible: dict[Widget, tuple[Region, Region]]) -> None:
        self.visible = visible
        self.where = visible[widget]
        region, clip = self.where
        self.shown = shown = region.intersection(clip)
        # Widgets in front of this one (visible_widgets runs front to back): their cells stay.
        self.front: list[Region] = []
        for other, (r, c) in visible.items():
            if other is widget:
                break
            area = r.intersection(c)
            if area.overlaps(shown):
                self.front.append(area)
        self.top = widget.content_offset.y
        styles = widget.styles
        cache = widget._styles_cache
        self.cache_width = cache._width  # what the held lines were rendered for
        self.plain = (
            cache._width == region.width
            and not styles.tint.a
            and widget.opacity == 1.0
            and styles.text_opacity == 1.0
            and not (styles.has_rule("hatch") and styles.hatch != "none")
            and not any(edge for edge, _ in styles.outline)
            and not styles.padding.left
            and not styles.padding.right
        )
        gutter = styles.gutter
        self.content_width, self.content_height = widget.content_region.size
        self.gutter_top = gutter.top
        self.left, self.right = gutter.left, gutter.left + self.content_width
        self.filters = widget.get_line_filters()
        base_background, self.background = widget.background_colors
        self.inner: Style = cache.get_inner_outer(base_background, self.background)[0].rich_style

    @property
    def width(self) -> int:
        return self.where[0].width


# The key a widget's frame is kept under in its style cache's line dict: Textual looks
# lines up by number only, and empties the dict whenever it renders the widget anew
# (a style, theme, focus or size change), which is when the frame goes too.
_FRAME_KEY = "adaptyst-top frame"


def _frame(widget: Widget, visible: dict[Widget, tuple[Region, Region]]) -> _Frame | None:
    where = visible.get(widget)
    if where is None:
        return None
    held: dict[object, object] = widget._styles_cache._cache  # type: ignore[assignment]
    frame = held.get(_FRAME_KEY)
    if (
        not isinstance(frame, _Frame)
        or frame.visible is not visible
        or frame.where != where
        or frame.cache_width != widget._styles_cache._width
    ):
        frame = _Frame(widget, visible)
        held[_FRAME_KEY] = frame
    return frame


def paint_lines(widget: Widget, lines: Iterable[int]) -> bool:
    """Write WIDGET's content LINES (as its render_line numbers them) to the terminal
    now. False, with nothing written, when it has to go through refresh()."""
    app = widget.app
    driver = app._driver
    if (
        driver is None
        or app.is_headless
        or app.is_inline
        or app._batch_count
        or not app._running
        or app._closed
    ):
        return False
    screen = app.screen
    if screen._layout_required or widget._layout_required:
        return False
    if widget._repaint_required:
        return False  # a refresh of it is on its way (a row gone): these lines join it
    # Only the top screen's compositor holds the widget when it is on the top screen.
    frame = _frame(widget, screen._compositor.visible_widgets)
    if frame is None:
        return False
    region, shown = frame.where[0], frame.shown
    wanted = sorted({y + frame.top for y in lines})
    # What refresh() marks, but for the compositor: the render cache (what render()
    # returned), the lines a widget renders itself, the style cache's lines.
    widget._layout_cache.clear()
    width = widget.size.width
    marked = [Region(0, y, width, 1) for y in wanted]
    widget._dirty_regions.update(marked)
    widget._styles_cache.set_dirty(*marked)
    color_system = app.console._color_system or ColorSystem.TRUECOLOR
    move_to = Control.move_to
    out: list[str] = []
    rows = [y for y in wanted if shown.y <= region.y + y < shown.bottom]
    for y, line in zip(rows, _render(widget, frame, rows), strict=True):
        screen_y = region.y + y
        covered = [(f.x, f.right) for f in frame.front if f.y <= screen_y < f.bottom]
        for x0, x1 in _uncovered(shown.x, shown.right, covered):
            out.append(move_to(x0, screen_y).segment.text)
            out.append(_ansi(_cells(line, x0 - region.x, x1 - region.x), color_system))
    block = _blocks.get(app)
    if block is not None:
        block.out.extend(out)
    elif out:
        _write(app, out)
    return True


def _write(app: App[Any], out: list[str]) -> None:
    """OUT, then the cursor back where the app has it, as one write."""
    driver = app._driver
    if driver is None:
        return
    cursor = app.screen.outer_size.clamp_offset(app.cursor_position)
    out = [*out, Control.move_to(*cursor).segment.text]
    if app._sync_available:  # the terminal shows it whole (what _begin/_end_update write)
        out = [SYNC_START, *out, SYNC_END]
    # One write: each is a hand-off to Textual's writer thread (a wake-up each).
    driver.write("".join(out))


def _render(widget: Widget, frame: _Frame, rows: list[int]) -> list[list[Segment]]:
    """Lines ROWS of WIDGET (its own numbering, border included), as the compositor
    would have them.

    Textual's style cache builds each line anew (borders, padding, background blends):
    about 0.2 ms a line here. When the widget's styles do nothing to its content but
    pad it to width (no tint, opacity, hatch, outline or side padding), a content line
    is the line the cache already holds with its content swapped: the border cells
    are kept, the cache is given the new line, and the app's filters are applied as
    the cache would apply them. A line is its segments: a `Strip` builds seven small
    caches, and Textual's way through padding, filters and crops made five of them."""
    cache = widget._styles_cache
    held: dict[int, Strip] = cache._cache
    top, bottom = frame.gutter_top, frame.gutter_top + frame.content_height
    lines: list[list[Segment]] = []
    for y in rows:
        old = held.get(y) if frame.plain else None
        edges = _edges(old, frame.left, frame.right) if old is not None else None
        if edges is None or not top <= y < bottom:
            lines.append(list(widget.render_lines(Region(0, y, frame.width, 1))[0]))
            continue
        content = widget.render_line(y - top)
        short = frame.content_width - content.cell_length
        if short > 0:  # padded as adjust_cell_length pads
            middle = [*content, Segment(" " * short, frame.inner)]
        else:
            middle = list(content.adjust_cell_length(frame.content_width, frame.inner))
        line = [*edges[0], *middle, *edges[1]]
        held[y] = Strip(line, frame.width)
        cache._dirty_lines.discard(y)
        for line_filter in frame.filters:
            line = line_filter.apply(line, frame.background)
        lines.append(line)
    return lines


def _cells(line: list[Segment], start: int, end: int) -> list[Segment]:
    """The segments of LINE's cells [START, END), split where a cut falls in one."""
    if start <= 0 and end >= sum(seg.cell_length for seg in line):
        return line
    return list(Segment.divide(line, [max(0, start), end]))[1]


def _ansi(line: list[Segment], color_system: ColorSystem) -> str:
    """LINE as the terminal's sequences, as Strip.render writes them."""
    render = Strip.render_style
    return "".join(
        text if style is None else render(style, text, color_system=color_system)
        for text, style, _ in line
    )


def _edges(line: Strip, left: int, right: int) -> tuple[list[Segment], list[Segment]] | None:
    """LINE's segments before cell LEFT and from cell RIGHT on (a border's), or None
    when a segment crosses either (then the line is rendered the long way)."""
    segments = list(line)
    cells = 0
    head = 0
    while cells < left and head < len(segments):
        cells += segments[head].cell_length
        head += 1
    if cells != left:
        return None
    tail = len(segments)
    cells = line.cell_length
    while cells > right and tail > head:
        tail -= 1
        cells -= segments[tail].cell_length
    if cells != right:
        return None
    return segments[:head], segments[tail:]


def _uncovered(x0: int, x1: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of [X0, X1) outside every span in COVERED."""
    spans: list[tuple[int, int]] = []
    at = x0
    for a, b in sorted(covered):
        if a > at:
            spans.append((at, min(a, x1)))
        at = max(at, b)
        if at >= x1:
            break
    if at < x1:
        spans.append((at, x1))
    return [(a, b) for a, b in spans if b > a]
