"""`f`: the sampled profile. The hottest functions (sorted by self time, total or
off-CPU time with `s`; a Python function's self time holds the interpreter's C beneath
it), and an icicle graph of the stacks below them, outermost frame on top, for every
thread or one (`t`), on the CPU or off it (`o`). Arrows move in the list (`tab`: in the
graph), `enter` zooms into a frame, `backspace` out, `/` jumps to a name; `u` times the
selected function exactly (a uprobe, or a python: probe) and shows its latency histogram
once attached. The functions `u` can time come first in the list."""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from adaptyst_top.snapshot import ProfileFunction
from adaptyst_top.tui.profile_view import Box, ProfileView, probe_spec
from adaptyst_top.tui.screens.prompt import PromptScreen

LIST_SHARE = 0.35  # of the screen's rows: the function list; the graph gets the rest
_WARM = ("#c0392b", "#d35400", "#e67e22", "#f39c12", "#b9770e", "#a04000")
_COOL = ("#2471a3", "#2e86c1", "#1f618d", "#5dade2", "#154360", "#2874a6")


class ProfileScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,f", "app.pop_screen", "Back"),
        Binding("escape,backspace", "zoom_out", "Zoom out"),
        Binding("enter", "zoom_in", "Zoom"),
        Binding("s", "sort", "Sort"),
        Binding("t", "thread", "Thread"),
        Binding("o", "off", "On/off-CPU"),
        Binding("tab", "switch", "List/graph"),
        Binding("u", "probe", "Probe it"),
        Binding("slash", "find", "Find"),
        Binding("up", "move('up')", show=False),
        Binding("down", "move('down')", show=False),
        Binding("left", "move('left')", show=False),
        Binding("right", "move('right')", show=False),
    ]

    def __init__(
        self, view: ProfileView, probe: Callable[[str], None], ascii: bool = False
    ) -> None:
        super().__init__()
        self.view = view
        self.probe = probe
        self.ascii = ascii or bool(os.environ.get("NO_COLOR"))
        self.in_list = True  # the arrows move in the list, else (tab) in the graph
        self.row = 0  # the list's selected row
        self._boxes: list[Box] = []
        self.said = ""

    def compose(self) -> ComposeResult:
        with Vertical(id="profile"):
            yield Static("", id="profile-head", markup=False)
            yield Static("", id="profile-functions", markup=False)
            yield Static("", id="profile-flame", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def _sizes(self) -> tuple[int, int, int]:
        width = max(20, self.size.width)
        rows = max(6, self.size.height - 3)  # the head line, the footer, a margin
        listed = max(2, int(rows * LIST_SHARE))
        return width, listed, rows - listed

    def redraw(self) -> None:
        v = self.view
        width, listed, graph_rows = self._sizes()
        what = "off-CPU time" if v.off else "on-CPU samples"
        thread = "every thread" if v.thread is None else f"PID {v.thread[0]} thread {v.thread[1]}"
        head = f"{v.samples:,} samples · {thread} · graph of {what} · {v.cost_text()}"
        line = Text(head + self._said(), no_wrap=True, overflow="ellipsis")
        self.query_one("#profile-head", Static).update(line)
        self.query_one("#profile-functions", Static).update(self._list(width, listed))
        self._boxes = v.layout(width, graph_rows)
        self.query_one("#profile-flame", Static).update(self._flame(width, graph_rows))

    def _said(self) -> str:
        said = self.said or self.view.note  # a key's answer first, then the profile's own
        return f" · {said}" if said else ""

    def _list(self, width: int, rows: int) -> Text:
        funcs = self.view.sorted_functions()
        n = max(1, self.view.samples)
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(
            f"{'self':>6} {'total':>6} {'off-CPU':>9}  function ({self.view.sort} first)\n",
            style="bold",
        )
        self.row = min(self.row, max(0, len(funcs) - 1))
        start = max(0, self.row - rows + 2)
        for i, f in enumerate(funcs[start : start + rows - 1], start):
            line = (
                f"{self.view.self_of(f) / n:>6.1%} {f.total / n:>6.1%} {f.off_ns / 1e9:>8.3f}s  "
                f"{f.name}  {os.path.basename(f.module)}"
            )
            selected = self.in_list and i == self.row
            out.append(line[:width] + "\n", style="reverse" if selected else "")
        return out

    def _flame(self, width: int, rows: int) -> Text:
        lines = [[" "] * width for _ in range(rows)]
        styles: list[list[Style | None]] = [[None] * width for _ in range(rows)]
        for b in self._boxes:
            label = b.node.name[: max(0, b.width - 1)].ljust(b.width)
            if b.width > 1:
                label = label[:-1] + ("|" if self.ascii else "▕")
            selected = not self.in_list and b.node.path == self.view.selected
            style = self._style(b.node.name, selected)
            for i, ch in enumerate(label[: width - b.x]):
                lines[b.depth][b.x + i] = ch
                styles[b.depth][b.x + i] = style
        out = Text(no_wrap=True)
        for chars, row_styles in zip(lines, styles, strict=True):
            for ch, cell in zip(chars, row_styles, strict=True):
                out.append(ch, style=cell or "")
            out.append("\n")
        return out

    def _style(self, name: str, selected: bool) -> Style:
        if self.ascii:
            return Style(reverse=selected, underline=not selected)
        palette = _COOL if self.view.off else _WARM
        color = palette[zlib.crc32(name.encode()) % len(palette)]
        return Style(bgcolor=color, color="white", reverse=selected, bold=selected)

    # ----- keys -------------------------------------------------------------------------

    def action_move(self, direction: str) -> None:
        if self.in_list:
            self.row = max(0, self.row + (1 if direction == "down" else -1))
        else:
            self.view.move(self._boxes, direction)
        self.redraw()

    def action_zoom_in(self) -> None:
        self.view.zoom_in()
        self.redraw()

    def action_zoom_out(self) -> None:
        if not self.view.zoom_out():
            self.app.pop_screen()
            return
        self.redraw()

    def action_sort(self) -> None:
        self.view.next_sort()
        self.redraw()

    def action_thread(self) -> None:
        self.said = self.view.next_thread()
        self.redraw()

    def action_off(self) -> None:
        self.view.off = not self.view.off
        self.view.zoom = self.view.selected = ()
        self.redraw()

    def action_switch(self) -> None:
        self.in_list = not self.in_list
        self.redraw()

    def selected_function(self) -> ProfileFunction | None:
        if self.in_list:
            funcs = self.view.sorted_functions()
            return funcs[self.row] if 0 <= self.row < len(funcs) else None
        if not self.view.selected:
            return None
        return self.view.function_named(self.view.selected[-1])

    def action_find(self) -> None:
        """`/`: the list's cursor on the first function whose name holds the text."""

        def found(text: str | None) -> None:
            want = (text or "").strip().lower()
            if not want:
                return
            funcs = self.view.sorted_functions()
            at = next((i for i, f in enumerate(funcs) if want in f.name.lower()), None)
            if at is None:
                self.said = f"no function named like {want!r}"
            else:
                self.in_list, self.row = True, at
                self.said = f"{funcs[at].name}: u times it"
            self.redraw()

        self.app.push_screen(PromptScreen("jump to a function (part of its name)"), found)

    def action_probe(self) -> None:
        f = self.selected_function()
        if f is None:
            self.said = "select a function first (arrows; tab for the list)"
        elif (spec := probe_spec(f)) is None:
            self.said = f"{f.name}: no symbol to attach to"
        else:
            self.probe(spec)
            self.said = f"probing {f.name}"
        self.redraw()
