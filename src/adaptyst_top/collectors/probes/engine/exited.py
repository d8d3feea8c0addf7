"""Exited processes' statistics moved out of the kernel's maps, where a module counts
processes apart (a job's ranks): each exited process's keys would stay there for the
session, and a long job of many steps would fill the maps (16,384 keys a module), losing
the hits of processes that come later. What they counted is kept here, as it was, and
read_module adds it back: a row's figures and each process's share read the same.

Past MAX_KEPT shares, the oldest are folded into one share of pid 0 per row key: the
row's figures stay whole, and pid 0 (never a user process's) is no process's share."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from adaptyst_top.collectors.probes.bpf.keys import Stats, merge_stats
from adaptyst_top.collectors.probes.engine.per_process import FOLDED_PID
from adaptyst_top.collectors.probes.engine.reading import SKEY_SIZE, hist_entries, user_key
from adaptyst_top.collectors.probes.model import ProbeModule

MAX_KEPT = 16384  # exited processes' (slot, (pid, key)) shares a module keeps apart


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
    named: dict[bytes, tuple[int, Any]] = {}
    for k, v in stats:
        slot, key = int(k.slot), user_key(module, k)
        named[bytes(k)] = (slot, key)
        s: Stats = (int(v.count), int(v.sum), int(v.min), int(v.max), int(v.oncpu))
        had = module.exited.get((slot, key))
        module.exited[(slot, key)] = merge_stats(had, s) if had is not None else s
    hist_table = module.reader("hist").table
    for raw, _slot, bucket, count in hist_entries(module):
        where = named.get(raw[:SKEY_SIZE])
        if where is None:
            continue
        into = module.exited_hist.setdefault(where, {})
        into[bucket] = into.get(bucket, 0) + count
        with contextlib.suppress(KeyError):
            del hist_table[hist_table.Key.from_buffer_copy(raw)]
    for k, _ in stats:
        with contextlib.suppress(KeyError):
            del reader.table[k]
        module.buckets.pop(bytes(k), None)
    _fold_oldest(module)
    module.last_stats = None  # read in full again: the keys moved
    return len(stats)


def _fold_oldest(module: ProbeModule) -> None:
    """The oldest shares past MAX_KEPT into each row key's FOLDED_PID share (its count
    taken as already seen, so that no rate jumps)."""
    while len(module.exited) > MAX_KEPT:
        oldest = next((w for w in module.exited if w[1][0] != FOLDED_PID), None)
        if oldest is None:
            return  # all folded already: one share per row key, bounded by the rows
        slot, (pid, key) = oldest
        s = module.exited.pop(oldest)
        buckets = module.exited_hist.pop((slot, (pid, key)), {})
        folded = (slot, (FOLDED_PID, key))
        had = module.exited.pop(folded, None)  # re-inserted last: it is never the oldest
        module.exited[folded] = merge_stats(had, s) if had is not None else s
        into = module.exited_hist.setdefault(folded, {})
        for b, c in buckets.items():
            into[b] = into.get(b, 0) + c
        row = module.by_slot.get(slot)
        if row is not None:
            seen = row.last_counts.pop((pid, key), 0)
            row.last_counts[(FOLDED_PID, key)] = row.last_counts.get((FOLDED_PID, key), 0) + seen
