"""A table on Textual's line API that re-renders only the rows that changed.

A DataTable refreshed every second costs 8.6% of a core here (docs/data-flow.md): every
update re-lays out the whole table. This one keeps a Strip per row, rebuilt only
when that row's cells change, and repaints only the changed rows that are visible.
Columns have priorities: on a narrow terminal the least important ones go first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from adaptyst_top.tui.columns import Column
from adaptyst_top.tui.glyphs import to_ascii
from adaptyst_top.tui.textual_private import paint_lines, when_done


@dataclass
class TableRow:
    key: str
    cells: dict[str, str]
    sort: dict[str, Any] = field(default_factory=dict)
    style: str = ""  # a component class suffix: "dim", "warn", "error"
    version: int = 0


FLEX_MIN = 26  # a flexible column (names) keeps at least this; minor columns go first


def _fit(text: str, width: int, right: bool) -> str:
    if len(text) > width:
        if "::" in text and width > 1:
            # A qualified name keeps its most telling end: the method, not the namespace.
            return "…" + text[len(text) - width + 1 :]
        return text[: max(0, width - 1)] + "…" if width > 1 else text[:width]
    return text.rjust(width) if right else text.ljust(width)


class FastTable(ScrollView, can_focus=True):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "fast-table--header",
        "fast-table--cursor",
        "fast-table--dim",
        "fast-table--warn",
        "fast-table--error",
    }
    DEFAULT_CSS = """
    /* Rows are laid out to the width there is: nothing to scroll sideways. */
    FastTable { height: 1fr; overflow-x: hidden; }
    FastTable > .fast-table--header { text-style: bold; color: $text-accent; }
    FastTable > .fast-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    FastTable:blur > .fast-table--cursor { background: $block-cursor-blurred-background; }
    FastTable > .fast-table--dim { color: $text-muted; }
    FastTable > .fast-table--warn { color: $text-warning; }
    FastTable > .fast-table--error { color: $text-error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
    ]

    cursor: reactive[int] = reactive(0, repaint=False)

    def __init__(self, columns: Iterable[Column], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self.rows: dict[str, TableRow] = {}
        self.order: list[str] = []
        self.filter_text = ""
        self.filter_fn: Callable[[TableRow, str], bool] = _default_filter
        self.sort_key: str | None = None
        self.sort_reverse = False
        # A log shown newest first: a cursor on the first row stays there as rows come
        # in above it, so the newest stay in view (a replay's move log hid its 15
        # newest moves above the view: the cursor followed its row down).
        self.follow_head = False
        self._strips: dict[tuple[str, int, int, bool], Strip] = {}
        # A row's style by its class and cursor: Textual's rich_style walks every
        # ancestor's styles on each call, and a row was rebuilt for each change.
        self._row_styles: dict[tuple[str, bool], Style] = {}
        self._dirty_rows: set[str] = set()  # rows changed since the last repaint
        self._batching = False  # inside sorted_once(): the order is put right at its end
        self._ascii = False
        self._order_stale = False
        self._layout: list[tuple[Column, int]] = []
        self._layout_width = -1
        # The longest text (label included) each column has shown: widths follow it.
        self._needs: dict[str, int] = _label_needs(self.columns)

    def set_columns(self, columns: Iterable[Column]) -> None:
        """Other columns (one shown only when some row has a value for it): laid out again."""
        self.columns = list(columns)
        self._needs = _label_needs(self.columns)
        self._layout_width = -1
        self._strips.clear()
        self.refresh()

    # ----- data -----------------------------------------------------------------------

    def upsert(
        self, key: str, cells: dict[str, str], sort: dict[str, Any] | None = None, style: str = ""
    ) -> None:
        self._note_needs(cells)
        row = self.rows.get(key)
        if row is None:
            self.rows[key] = TableRow(key, cells, sort or {}, style)
            if self._batching:
                self._order_stale = True
            else:
                self._reorder()
            return
        if row.cells == cells and row.style == style:
            row.sort = sort or row.sort
            return
        row.cells, row.style, row.version = cells, style, row.version + 1
        row.sort = sort or row.sort
        # Its place may have changed; where it did not, only its line is repainted (a
        # sorted pane whose figures change every second would otherwise go through
        # Textual's compositor whole, every second).
        ordered = self.sort_key is not None or self.filter_text
        if ordered and self._batching:
            self._order_stale = True
        if not (ordered and not self._batching and self._reorder(True)):
            self._refresh_row(key)

    @contextlib.contextmanager
    def sorted_once(self) -> Iterator[None]:
        """Upserts inside are put in order once, at the end: a sorted pane of 3,000 rows,
        50 of which change a tick, sorts once a tick, not 50 times."""
        self._batching = True
        try:
            yield
        finally:
            self._batching = False
            if self._order_stale:
                self._order_stale = False
                self._reorder(True)

    def replace_all(self, rows: Iterable[tuple[str, dict[str, str], dict[str, Any], str]]) -> None:
        """Every row at once, as (key, cells, sort, style); the rest removed; put in
        order once (a row at a time, 20,000 nodes' rows took minutes)."""
        keys = set()
        with self.sorted_once():
            for key, cells, sort, style in rows:
                self.upsert(key, cells, sort, style)
                keys.add(key)
            self.retain(keys)

    def _note_needs(self, cells: dict[str, str]) -> None:
        """A text longer than its column has shown re-lays the table: a column grows
        with its figures (`Runs` at 2,109) instead of drifting from its header."""
        for k, need in self._needs.items():
            n = len(cells.get(k, ""))
            if n > need:
                self._needs[k] = n
                self._layout_width = -1  # laid out again, for the longer text

    def remove_row(self, key: str) -> None:
        # Not `remove`: that is Widget.remove(), which Textual calls to unmount a widget.
        if self.rows.pop(key, None) is not None:
            self._reorder()

    def retain(self, keys: set[str]) -> None:
        gone = set(self.rows) - keys
        for key in gone:
            del self.rows[key]
        if gone and self._batching:
            self._order_stale = True
        elif gone:
            self._reorder()

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._reorder()

    def set_sort(self, column: str | None, reverse: bool = False) -> None:
        self.sort_key, self.sort_reverse = column, reverse
        self._reorder()

    @property
    def selected_key(self) -> str | None:
        if 0 <= self.cursor < len(self.order):
            return self.order[self.cursor]
        return None

    def _reorder(self, only_if_moved: bool = False) -> bool:
        """Rows in the filter's and the sort's order; the whole table repainted. With
        ONLY_IF_MOVED, nothing is done when the order stays as it is. True if done."""
        keys = [
            k
            for k, r in self.rows.items()
            if not self.filter_text or self.filter_fn(r, self.filter_text)
        ]
        if self.sort_key is not None:
            col = self.sort_key

            def value(k: str) -> tuple[int, Any]:
                v = self.rows[k].sort.get(col, self.rows[k].cells.get(col, ""))
                return (0, v) if v is not None else (1, 0)

            keys.sort(key=value, reverse=self.sort_reverse)
        if only_if_moved and keys == self.order:
            return False
        selected = self.selected_key
        at_head = self.follow_head and self.cursor == 0
        self.order = keys
        if at_head:
            self.scroll_to(y=0, animate=False)
        elif selected in keys:
            self.cursor = keys.index(selected)
        self.cursor = min(self.cursor, max(0, len(keys) - 1))
        self.virtual_size = Size(self.text_width, len(keys) + 1)
        self.refresh()
        return True

    def _refresh_row(self, key: str) -> None:
        """KEY's line is repainted once the current handler is done, with the others
        that changed in it (see _repaint_rows)."""
        if not self._dirty_rows:
            when_done(self, self._repaint_rows)
        self._dirty_rows.add(key)

    def _repaint_rows(self) -> None:
        """Straight to the terminal when it can be (tui/direct_paint.py). Otherwise one
        region over the changed lines when they are most of its lines, else one
        per line: Textual's compositor takes one region of 50 lines for less than 50
        regions of one (a toy table of 50 changing rows in tmux: 1.23% of a core -> 1.02%)."""
        dirty, self._dirty_rows = self._dirty_rows, set()
        top, height = int(self.scroll_offset.y), self.size.height
        ys = sorted(
            y for i, k in enumerate(self.order) if k in dirty and 1 <= (y := i - top + 1) < height
        )
        if not ys or paint_lines(self, ys):
            return
        width, span = self.text_width, ys[-1] - ys[0] + 1
        if 2 * len(ys) >= span:
            self.refresh(Region(0, ys[0], width, span))
        else:
            self.refresh(*(Region(0, y, width, 1) for y in ys))

    # ----- cursor ----------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        if 0 <= old < len(self.order):
            self._refresh_row(self.order[old])
        if 0 <= new < len(self.order):
            self._refresh_row(self.order[new])
            self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        top = int(self.scroll_offset.y)
        visible = max(1, self.size.height - 1)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)

    def action_cursor(self, step: int) -> None:
        if self.order:
            self.cursor = min(len(self.order) - 1, max(0, self.cursor + step))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.size.height - 2))

    def action_cursor_to(self, index: int) -> None:
        if self.order:
            self.cursor = index if index >= 0 else len(self.order) - 1

    # ----- rendering --------------------------------------------------------------------

    def columns_for(self, width: int) -> list[tuple[Column, int]]:
        """The columns shown at WIDTH and the cells each gets. Which are shown depends on
        the declared widths only (a wide value never hides a column); then each column
        gets what its longest text needs, the narrowest first, and what is left goes
        to the names."""
        if width == self._layout_width:
            return self._layout
        cols = list(self.columns)
        # Drop the least important columns until the fixed ones fit with room to spare.
        while cols:
            fixed = sum(c.width + 1 for c in cols if c.width)
            flex = [c for c in cols if not c.width]
            if fixed + FLEX_MIN * len(flex) <= width or len(cols) == 1:
                break
            drop = min(cols, key=lambda c: c.priority)
            cols.remove(drop)
        shares = _shares(cols, width - max(0, len(cols) - 1), self._needs)
        self._layout = [(c, shares[c.key]) for c in cols]
        self._layout_width = width
        self._strips.clear()
        return self._layout

    def on_mount(self) -> None:
        self._ascii = bool(getattr(self.app, "ascii", False))  # --ascii: every cell ASCII

    def _text_of(self, cells: dict[str, str], width: int) -> str:
        parts = [_fit(cells.get(c.key, ""), w, c.right) for c, w in self.columns_for(width)]
        text = " ".join(parts)[:width].ljust(width)
        return to_ascii(text) if self._ascii else text

    @property
    def text_width(self) -> int:
        """The cells a row's text has: the vertical scrollbar, when shown, has its own
        (rows laid out over it lost their last column: `1.58 m`, `p9`)."""
        return self.scrollable_content_region.width or self.size.width

    def render_line(self, y: int) -> Strip:
        width = self.text_width
        if y == 0:
            labels = {
                c.key: c.label
                + (
                    " ▼"
                    if c.key == self.sort_key and self.sort_reverse
                    else " ▲"
                    if c.key == self.sort_key
                    else ""
                )
                for c in self.columns
            }
            header = self.get_component_rich_style("fast-table--header")
            return Strip([Segment(self._text_of(labels, width), header)])
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(self.order):
            return Strip.blank(width, self.rich_style)
        key = self.order[index]
        row = self.rows[key]
        is_cursor = index == self.cursor
        cache_key = (key, row.version, width, is_cursor)
        strip = self._strips.get(cache_key)
        if strip is None:
            strip = Strip(
                [Segment(self._text_of(row.cells, width), self._row_style(row, is_cursor))]
            )
            if len(self._strips) > 4 * (len(self.rows) + 8):
                self._strips.clear()  # bounded: old versions go
            self._strips[cache_key] = strip
        return strip

    def _row_style(self, row: TableRow, is_cursor: bool) -> Style:
        style = self._row_styles.get((row.style, is_cursor))
        if style is None:
            style = self.rich_style
            if row.style:
                style = style + self.get_component_rich_style(f"fast-table--{row.style}")
            if is_cursor:
                style = style + self.get_component_rich_style("fast-table--cursor")
            self._row_styles[(row.style, is_cursor)] = style
        return style

    def notify_style_update(self) -> None:
        """Styles changed (a theme, focus, a class): rows are styled anew."""
        super().notify_style_update()
        self._row_styles.clear()
        self._strips.clear()

    def on_resize(self) -> None:
        self._layout_width = -1
        self.virtual_size = Size(self.text_width, len(self.order) + 1)


def _label_needs(columns: Iterable[Column]) -> dict[str, int]:
    return {c.key: len(c.label) for c in columns}


def _shares(cols: list[Column], room: int, needs: dict[str, int]) -> dict[str, int]:
    """ROOM cells among COLS. A fixed column has its declared width and a flexible one
    up to FLEX_MIN; then each column whose text would be cut grows towards what it
    needs, the smallest need served first, so that one long name does not take the
    room a short figure needs; what is left goes to the first flexible column (the
    names). Short of room, the flexible columns shrink (down to 4 cells)."""
    shares = {c.key: c.width or min(FLEX_MIN, max(4, needs.get(c.key, 0))) for c in cols}
    left = room - sum(shares.values())
    flex = [c for c in cols if not c.width]
    if left < 0:  # only flexible columns give room back; the fixed ones were fitted
        for c in sorted(flex, key=lambda c: -shares[c.key]):
            take = min(-left, shares[c.key] - 4)
            shares[c.key] -= take
            left += take
        return shares
    cut = sorted(
        (c for c in cols if needs.get(c.key, 0) > shares[c.key]), key=lambda c: needs[c.key]
    )
    while cut and left > 0:
        c = cut.pop(0)
        grow = min(needs[c.key] - shares[c.key], left // (len(cut) + 1) or left)
        shares[c.key] += grow
        left -= grow
    if flex and left > 0:
        shares[flex[0].key] += left
    return shares


def _default_filter(row: TableRow, text: str) -> bool:
    text = text.lower()
    return any(text in v.lower() for v in row.cells.values())
