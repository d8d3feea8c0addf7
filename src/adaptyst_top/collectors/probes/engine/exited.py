"""Exited processes' statistics moved out of the kernel's maps, where a module counts
processes apart (a job's ranks): each exited process's keys would stay there for the
session, and a long job of many steps would fill the maps (16,384 keys a module), losing
the hits of processes that come later. What they counted is kept here, as it was, and
read_module adds it back: a row's figures and each process's share read the same.

What is kept is bounded (this runs in the agent, for every user's sessions): past
MAX_SHARES shares or MAX_BUCKETS histogram buckets a module, the oldest fold into one
share of pid 0 per row key (the row's figures whole; pid 0, never a user process's, is
no process's share); where even folding leaves no room (a keyed row's many keys), the
keys stay in the kernel's maps, whose full counter then says so."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from adaptyst_top.collectors.probes.bpf.keys import Stats, merge_stats
from adaptyst_top.collectors.probes.engine.per_process import FOLDED_PID
from adaptyst_top.collectors.probes.engine.reading import SKEY_SIZE, hist_entries, user_key
from adaptyst_top.collectors.probes.model import ProbeModule

MAX_SHARES = 4096  # exited shares a module keeps, folded ones with them
MAX_BUCKETS = 32768  # and their histograms' buckets: a few MB a module, at most

Share = tuple[int, Any]  # (slot, (pid, key))


def _gone(pid: int) -> bool:
    """PID has exited (a zombie has not: it may be a parent's to reap, and runs nothing)."""
    return not os.path.exists(f"/proc/{pid}")


def retire_exited(module: ProbeModule) -> int:
    """MODULE's exited processes' keys out of its maps and into module.exited (stats) and
    module.exited_hist; how many kernel keys were freed."""
    if not module.by_process or module.closed:
        return 0
    reader = module.reader("stats")
    pids = {int(k.pid) for k, _ in reader.items()}
    gone = {p for p in pids if p != FOLDED_PID and _gone(p)}
    if not gone:
        return 0
    # Read again now that they have exited: no hit of theirs can come after this.
    stats = [(k, v) for k, v in reader.items() if int(k.pid) in gone]
    raws = {bytes(k) for k, _ in stats}
    hist: dict[bytes, list[tuple[bytes, int, int]]] = {}
    for raw, _slot, bucket, count in hist_entries(module):
        if raw[:SKEY_SIZE] in raws:
            hist.setdefault(raw[:SKEY_SIZE], []).append((raw, bucket, count))
    buckets = sum(map(len, hist.values()))
    if not _room(module, len(stats), buckets):
        return 0  # none: the keys stay where they are
    hist_table = module.reader("hist").table
    freed = 0
    for k, v in stats:
        try:
            del reader.table[k]
        except KeyError:
            continue  # still there (or gone already): not kept twice
        freed += 1
        share = (int(k.slot), user_key(module, k))
        s: Stats = (int(v.count), int(v.sum), int(v.min), int(v.max), int(v.oncpu))
        _keep(module, share, s, {b: c for _raw, b, c in hist.get(bytes(k), [])})
        module.exited_order[share] = None
        for raw, _bucket, _count in hist.get(bytes(k), []):
            with contextlib.suppress(KeyError):  # an orphan bucket is never read
                del hist_table[hist_table.Key.from_buffer_copy(raw)]
        module.buckets.pop(bytes(k), None)
    module.last_stats = None  # read in full again: the keys moved
    return freed


def _keep(module: ProbeModule, share: Share, s: Stats, buckets: dict[int, int]) -> None:
    """S and BUCKETS added to SHARE's, the buckets kept counted."""
    had = module.exited.get(share)
    module.exited[share] = merge_stats(had, s) if had is not None else s
    into = module.exited_hist.setdefault(share, {})
    before = len(into)
    for b, c in buckets.items():
        into[b] = into.get(b, 0) + c
    module.exited_buckets += len(into) - before


def _room(module: ProbeModule, shares: int, buckets: int) -> bool:
    """Room for SHARES more shares and BUCKETS more buckets, the oldest folded to make it."""

    def full() -> bool:
        return (
            len(module.exited) + shares > MAX_SHARES
            or module.exited_buckets + buckets > MAX_BUCKETS
        )

    while full() and module.exited_order:
        share, _ = module.exited_order.popitem(last=False)  # the oldest, at once
        _fold(module, share)
    return not full()


def _fold(module: ProbeModule, share: Share) -> None:
    """SHARE into its row key's FOLDED_PID share, its count taken as already seen (no
    rate jumps) and its own figures dropped."""
    slot, (pid, key) = share
    s = module.exited.pop(share)
    buckets = module.exited_hist.pop(share, {})
    module.exited_buckets -= len(buckets)
    _keep(module, (slot, (FOLDED_PID, key)), s, buckets)
    row = module.by_slot.get(slot)
    if row is not None:
        seen = row.last_counts.pop((pid, key), 0)
        row.last_counts[(FOLDED_PID, key)] = row.last_counts.get((FOLDED_PID, key), 0) + seen
        row.rates.pop((pid, key), None)
