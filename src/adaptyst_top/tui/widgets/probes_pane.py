"""The probes pane: one row per probe entry (row and key), keyed by its ProbeRef, with
each row's rate and p99 history for the detail view."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from adaptyst_top.snapshot import ProbeEntry
from adaptyst_top.tui.columns import Column
from adaptyst_top.tui.rank_view import View, rows_of
from adaptyst_top.tui.rows import PROBE_COLUMNS, SORTABLE, probe_row
from adaptyst_top.tui.widgets.devices_pane import HISTORY
from adaptyst_top.tui.widgets.fast_table import FastTable


def columns(with_energy: bool, with_ranks: bool) -> tuple[Column, ...]:
    """J/call only once some row has joules (a recording of before, or a node with no CPU
    energy, keeps its room for the latencies); Imbal only for rows counted per rank."""
    hidden = {"energy"} if not with_energy else set()
    hidden |= {"imbalance"} if not with_ranks else set()
    return tuple(c for c in PROBE_COLUMNS if c.key not in hidden)


class ProbesPane(FastTable):
    def __init__(self, p99_warn_ns: float) -> None:
        super().__init__(columns(False, False), id="probes")
        self._shown_columns = (False, False)  # (with energy, with ranks)
        self.view: View = "merged"  # a job's rows: merged, per rank or per node (R)
        self.border_title = "Probes"
        self.p99_warn_ns = p99_warn_ns
        # The hot row first: most time in all (calls x mean); `s` goes on from here.
        self.sort_key, self.sort_reverse = SORTABLE[0], True
        self.entries: dict[str, ProbeEntry] = {}
        self.rate_history: dict[str, deque[float | None]] = {}
        self.p99_history: dict[str, deque[float | None]] = {}
        self._cells_for: tuple[float, str | None, View] | None = None  # what rows depend on
        self._key_of: dict[int, tuple[ProbeEntry, str]] = {}  # id(entry): it, its row key
        self._read_only = False

    def show(
        self,
        probes: Sequence[ProbeEntry],
        read_only: bool,
        app: str | None = None,
        host: str = "",
    ) -> None:
        """APP: the launched application's name (task probes show it as their target);
        HOST: the node whose rows name no node (per node, R)."""
        with_energy = with_ranks = False
        entries = {}
        # The engine hands back the same entry for a row that did not change (most rows
        # of a wide glob sit idle): its cells are the ones shown.
        same_context = self._cells_for == (self.p99_warn_ns, app, self.view)
        self._cells_for = (self.p99_warn_ns, app, self.view)
        # An entry handed back unchanged keeps its key: no ProbeRef and string per row
        # per tick. Each is held with its entry, so an id is never another entry's.
        known, self._key_of = self._key_of, {}
        shown: list[tuple[str | None, ProbeEntry]]
        if any(p.parts for p in probes):
            with_ranks = True
            shown = list(rows_of(probes, self.view, host))
        else:
            shown = [(None, p) for p in probes]
        with self.sorted_once():
            for given, p in shown:
                last = known.get(id(p))
                key = given or (last[1] if last is not None and last[0] is p else p.ref.text)
                self._key_of[id(p)] = (p, key)
                entries[key] = p
                with_energy = with_energy or p.energy_j is not None
                self.rate_history.setdefault(key, deque(maxlen=HISTORY)).append(p.rate_hz)
                self.p99_history.setdefault(key, deque(maxlen=HISTORY)).append(p.p99_ns)
                if same_context and p is self.entries.get(key) and key in self.rows:
                    continue
                cells, sort, style = probe_row(p, self.p99_warn_ns, app)
                self.upsert(key, cells, sort, style)
        if (with_energy, with_ranks) != self._shown_columns:
            self._shown_columns = (with_energy, with_ranks)
            self.set_columns(columns(with_energy, with_ranks))
        self.retain(set(entries))
        for history in (self.rate_history, self.p99_history):
            for gone in set(history) - set(entries):
                del history[gone]
        self.entries = entries
        self._read_only = read_only
        self._say_rows()

    def set_filter(self, text: str) -> None:
        super().set_filter(text)
        self._say_rows()  # at once: a paused or ended replay has no next tick

    def _say_rows(self) -> None:
        if not self.entries:
            subtitle = "no probes" if self._read_only else "no probes: a adds one"
        elif self.filter_text:
            subtitle = f"{len(self.order)} of {len(self.entries)} rows match {self.filter_text}"
        else:
            subtitle = f"{len(self.entries)} rows"
        if self.border_subtitle != subtitle:  # a border change repaints the pane
            self.border_subtitle = subtitle

    def selected(self) -> ProbeEntry | None:
        key = self.selected_key
        return self.entries.get(key) if key else None

    def follow(self, key: str) -> str:
        """KEY, or the row a pending spec's KEY became once it attached (the detail of a
        spec opened while pending once said "this probe is gone" as it counted): its
        first row in the table's order. KEY itself while the spec has none."""
        if key in self.entries:
            return key
        group, row, _ = key.split("\x1f", 2)
        if row != "None":
            return key
        rows = [k for k, p in self.entries.items() if str(p.group) == group]
        shown = [k for k in self.order if k in rows]
        return (shown or rows or [key])[0]

    def drop_group(self, group: int | str) -> None:
        """Rows of a removed spec go at once, before the next snapshot."""
        for key in [k for k, p in self.entries.items() if p.group == group]:
            self.remove_row(key)
            del self.entries[key]
