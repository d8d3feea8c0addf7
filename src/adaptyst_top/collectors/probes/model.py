"""The probe engine's data: what one spec became (a group), its rows (one per attach
point, with their statistics), the attach calls kept to undo and redo them, and the
compiled module they share."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.collectors.probes.bpf.keys import KeyResolver, Stats, c_text, told_name
from adaptyst_top.collectors.probes.bpf.maps import MapReader
from adaptyst_top.collectors.probes.bpf.program import KernelError
from adaptyst_top.collectors.probes.engine.uprobe_multi import MultiLinks
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.snapshot import Latency, ProbeEntry, ProbeState

KERNEL_ERRORS = {
    KernelError.MAP_FULL: "hits lost: a statistics map is full",
    KernelError.TOO_DEEP: "calls nested deeper than the per-thread stack: not measured",
    KernelError.NO_ENTRY: "returns without a recorded entry",
    KernelError.BAD_COUNT: "hand-overs refused: a count out of range",
    KernelError.BAD_TIME: "handed-over times past a day: counted, not timed",
}
# Returns without an entry are expected around every switch on or off (and when a
# probe attaches mid-call); they are counted, and the check keeps the pairs right.
# A target's own hand-overs that lie cost only its own rows' figures: not said each time.
QUIET_ERRORS = {KernelError.NO_ENTRY, KernelError.BAD_TIME}


class ProbeError(RuntimeError):
    """Why a probe cannot be attached, in one line."""


@dataclass
class Attachment:
    """One uprobe (or uretprobe) link, kept to undo and redo it."""

    fn_name: str
    path: str
    sym: str = ""
    addr: int = 0
    ret: bool = False
    ref_ctr: int = 0  # file offset of a USDT semaphore the kernel keeps raised meanwhile
    # Where in the file, as this process placed it from the file's executable segments:
    # attached there, nothing resolved again (None: not in the file: never attached).
    offset: int | None = None
    cookie: int = 0  # what the program reads to tell the probe (a precompiled module's slot)


WHOLE_REREAD_S = 0.5


@dataclass
class Row:
    """One attach point (a function, a USDT probe or pair) and its statistics."""

    id: int
    spec: ProbeSpec
    name: str
    path: str
    cost_class: str  # what a hit costs: overhead.EMULATED, SINGLESTEP, USDT, USDT_PAIR
    slot: int  # the slot whose program keys the statistics
    group: int = -1  # the ProbeGroup it belongs to (set when its group is built)
    attachments: list[Attachment] = field(default_factory=list)
    fns: list[str] = field(default_factory=list)  # program names, for bpf run time
    offset: int | None = None  # a function's file offset, for a multi-uprobe link
    after: int | None = None  # file offset where its interval starts again (entry_retime.py)
    state: ProbeState = "pending"
    error: str = ""
    module: ProbeModule | None = None
    linked: bool = False  # programs really attached (lags `state` while a detach is queued)
    pids: set[int] = field(default_factory=set)  # the processes attached for (-1: every one)
    unlinking: bool = False  # a background detach is running
    bpf_ns: float | None = None  # BPF run time per hit, last read
    bpf_ns_hits: int = -1  # the row's hits when bpf_ns was read: unchanged, so is it
    # Keyed by what they were made from: (count, total), (count, total, cost in interval).
    hist_lists: dict[Any, tuple[tuple[int, int], tuple[tuple[int, int], ...]]] = field(
        default_factory=dict
    )
    lat_cache: dict[
        Any, tuple[tuple[int, int, float, float], tuple[Latency, Latency, float | None]]
    ] = field(default_factory=dict)
    # The last snapshot entry per key, and what it was made from (reused while unchanged).
    entry_cache: dict[Any, tuple[tuple[Any, ...], ProbeEntry]] = field(default_factory=dict)
    # The row's entries as a whole, and what they were made from: an idle row's are
    # handed back without a look at each key.
    entries: tuple[tuple[Any, ...], list[ProbeEntry]] | None = None
    stats_version: int = 0  # bumped whenever read() gives `stats` new figures
    # Cumulative per key (None for an unsplit probe), refreshed by read():
    stats: dict[Any, Stats] = field(default_factory=dict)
    hist: dict[Any, dict[int, int]] = field(default_factory=dict)
    last_counts: dict[Any, int] = field(default_factory=dict)
    rates: dict[Any, float] = field(default_factory=dict)
    interval_hits: int = 0
    # A row whose latencies are sampled (an opencl kernel's): what its hits not timed
    # cost (cost_class is a timed hit's), and its timed hits in the last interval.
    count_class: str | None = None
    interval_timed: int = 0
    last_timed: int = 0
    rates_version: int = -1  # the stats_version the rates were last worked out from
    # Counted per process: (stats_version, rates_version, interval_hits) and its figures
    # merged (engine/per_process.py's Merged), worked out again only when one moved.
    merged: tuple[tuple[int, int, int], Any] | None = None


@dataclass
class ProbeGroup:
    """What one spec became: its rows, or the error that stopped it."""

    id: int  # the engine's, unique for its life: a ProbeRef's group
    spec_text: str
    spec: ProbeSpec | None = None
    state: str = "pending"  # pending | compiling | attached | error
    error: str = ""
    rows: list[Row] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    planned: int = 0  # attach points found, once planned: how long attaching may take
    # Seconds spent planning, compiling and attaching (bench_wide_attach reads them).
    timings: dict[str, float] = field(default_factory=dict)
    multi_links: bool = False  # its functions attached through multi-uprobe links


class ProbeModule:
    """One loaded BPF object and the attach points it serves."""

    def __init__(
        self,
        bpf: Any,
        rows: list[Row],
        multi: MultiLinks | None = None,
        oncpu: bool = False,
        by_process: bool = False,
    ) -> None:
        self.bpf = bpf
        self.measures_oncpu = oncpu  # its calls' on-CPU time is measured (oncpu.py)
        # Each process's statistics apart: a row's stats are keyed (pid, key).
        self.by_process = by_process
        self.multi = multi  # its functions' multi-uprobe links (None: one uprobe each)
        self.rows = rows
        self.by_slot = {r.slot: r for r in rows}
        self.closed = False
        # Held while detaching or closing, so that the two never race over the same fds.
        self.lock = threading.Lock()
        self.errors_seen = [0] * len(KERNEL_ERRORS)
        # The statistics map as last read: unchanged, the histograms are not read again.
        self.last_stats: dict[int, dict[Any, Stats]] | None = None
        # Each kernel key's histogram as last read (its skey's bytes: bucket -> count).
        self.buckets: dict[bytes, dict[int, int]] = {}
        # Exited processes' statistics and histograms, out of the maps (engine/exited.py):
        # (slot, (pid, key)) -> as the kernel last had them.
        self.exited: dict[tuple[int, Any], Stats] = {}
        self.exited_hist: dict[tuple[int, Any], dict[int, int]] = {}
        self.exited_buckets = 0  # the buckets in exited_hist
        self.exited_order: OrderedDict[tuple[int, Any], None] = OrderedDict()  # not folded
        self._readers: dict[str, MapReader] = {}
        self.keys = KeyResolver(
            {r.slot: r.spec.arg_type for r in rows if r.spec.keyed and r.slot >= 0}
        )
        self.whole: dict[str, str] = {}  # a long name's key -> its whole text
        self._whole_read_at = -WHOLE_REREAD_S

    def whole_name(self, key: str) -> str:
        """A device layer's long name whole, as its name site told it (else KEY, its
        key): the names map read again on a miss, at most twice a second."""
        got = self.whole.get(key)
        if got is None and time.monotonic() - self._whole_read_at > WHOLE_REREAD_S:
            self._whole_read_at = time.monotonic()
            with contextlib.suppress(OSError, KeyError):
                for k, v in self.reader("names").items():
                    if (name := told_name(bytes(k), bytes(v))) is not None:
                        self.whole[c_text(bytes(k))] = name
            got = self.whole.get(key)
        return got or key

    def reader(self, name: str) -> MapReader:
        r = self._readers.get(name)
        if r is None:
            r = self._readers[name] = MapReader(self.bpf[name])
        return r

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                if self.multi is not None:
                    self.multi.close()
                with contextlib.suppress(Exception):
                    self.bpf.cleanup()
                if self.keys.binary is not None:
                    self.keys.binary.close()


def closes_interval(row: Row, a: Attachment) -> bool:
    """Whether A's program closes an interval (a return, or the END of a USDT pair)."""
    return a.ret or (row.spec.is_pair and a.fn_name == row.fns[-1])


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
