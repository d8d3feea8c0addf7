"""Reading a probe module's kernel maps into its rows: cumulative statistics and
histograms per key, the errors the programs counted, rates over the interval, and the
stacks of threads that have exited, the programs' own run time."""

from __future__ import annotations

import contextlib
import ctypes as ct
import os
import struct
from collections.abc import Iterator
from typing import Any

from adaptyst_top.collectors.probes.bpf.keys import Stats, hashed_name, merge_stats
from adaptyst_top.collectors.probes.bpf.layouts import struct_format
from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.model import (
    KERNEL_ERRORS,
    QUIET_ERRORS,
    ProbeModule,
    Row,
)

# struct hkey (slot, kind, num, str; bucket, pad) and its u64 count, from bpf/layouts.py.
_HKEY = struct.Struct(struct_format("hkey"))
_COUNT = struct.Struct("<Q")
_INDEX = struct.Struct("<I")  # an array map's key
_BUCKET = struct.Struct("<II")  # an hkey's bucket and pad, after its skey


# A walk of the histogram map visits ~2,000 empty buckets in the time one lookup takes
# here (131,072 buckets: 0.37 ms; a lookup from Python: ~5 us).
_BUCKETS_PER_LOOKUP = 2048
SKEY_SIZE = _HKEY.size - 8  # struct skey: an hkey less its bucket and pad


def user_key(module: ProbeModule, k: Any) -> Any:
    """A stats map key K as a row knows it: (pid, key) where its module counts processes
    apart."""
    key: Any = module.keys.key_of(k)
    if hashed_name(key):  # a device layer's long name: whole where it was told
        key = module.whole_name(key)
    return (int(k.pid), key) if module.by_process else key


def read_module(module: ProbeModule) -> None:
    """Each row's cumulative statistics and histogram, per key."""
    stats: dict[int, dict[Any, Stats]] = {}
    # Per kernel key: its skey, its user key, its slot and how many buckets it has.
    kernel_keys: list[tuple[bytes, Any, int, int]] = []
    for k, v in module.reader("stats").items():
        slot = int(k.slot)
        per_slot = stats.setdefault(slot, {})
        key = user_key(module, k)
        new = (int(v.count), int(v.sum), int(v.min), int(v.max), int(v.oncpu))
        # Two kernel keys can be one user key (a string read here and in the kernel).
        per_slot[key] = merge_stats(per_slot[key], new) if key in per_slot else new
        kernel_keys.append((bytes(k), key, slot, int(v.buckets)))
    for (slot, key), s in module.exited.items():  # what exited processes counted (exited.py)
        per_slot = stats.setdefault(slot, {})
        per_slot[key] = merge_stats(per_slot[key], s) if key in per_slot else s
    if stats == module.last_stats:
        return  # no hit since the last read: the histograms cannot have changed either
    module.last_stats = stats
    # Only the slots hit since the last read: most rows of a wide glob sit idle, and an
    # idle row keeps its statistics, its histogram and so its snapshot entries as they were.
    changed = {s for s, row in module.by_slot.items() if s in stats and stats[s] != row.stats}
    if not changed:
        return
    hit = [(raw, key, slot, n) for raw, key, slot, n in kernel_keys if slot in changed]
    if not _look_up_known_buckets(module, hit):
        _walk_histograms(module, changed)
    hists: dict[int, dict[Any, dict[int, int]]] = {}
    for raw, key, slot, _n in hit:
        per_key = hists.setdefault(slot, {}).setdefault(key, {})
        for bucket, count in module.buckets.get(raw, {}).items():
            per_key[bucket] = per_key.get(bucket, 0) + count
    for (slot, key), buckets in module.exited_hist.items():
        if slot in changed:
            per_key = hists.setdefault(slot, {}).setdefault(key, {})
            for bucket, count in buckets.items():
                per_key[bucket] = per_key.get(bucket, 0) + count
    for slot in changed:
        row = module.by_slot[slot]
        row.stats = stats[slot]
        row.hist = hists.get(slot, {})
        row.stats_version += 1


def _look_up_known_buckets(module: ProbeModule, hit: list[tuple[bytes, Any, int, int]]) -> bool:
    """The buckets of the kernel keys HIT, each looked up, when each key has the buckets
    it had at the last read (the kernel counts them) and the lookups cost less than a
    walk of the map. False, with nothing changed, when the map has to be walked."""
    table = module.reader("hist").table
    known = [module.buckets.get(raw, {}) for raw, _key, _slot, _n in hit]
    if any(n != len(b) for (_raw, _key, _slot, n), b in zip(hit, known, strict=True)):
        return False  # a bucket new since the last read
    if sum(len(b) for b in known) > table.max_entries // _BUCKETS_PER_LOOKUP:
        return False
    fresh: list[dict[int, int]] = []
    key_t = table.Key
    for (raw, _key, _slot, _n), buckets in zip(hit, known, strict=True):
        counts = {}
        for bucket in buckets:
            try:
                counts[bucket] = int(
                    table[key_t.from_buffer_copy(raw + _BUCKET.pack(bucket, 0))].value
                )
            except KeyError:  # gone (the module closing): walk what is there
                return False
        fresh.append(counts)
    for (raw, _key, _slot, _n), counts in zip(hit, fresh, strict=True):
        module.buckets[raw] = counts
    return True


def hist_entries(module: ProbeModule) -> Iterator[tuple[bytes, int, int, int]]:
    """Every entry of the histogram map, from one walk: its key's bytes, slot, bucket
    and count."""
    reader = module.reader("hist")
    keys, values, _n = reader.raw()
    if ct.sizeof(reader.table.Key) != _HKEY.size:
        raise RuntimeError(
            f"hist key of {ct.sizeof(reader.table.Key)} bytes, {_HKEY.size} expected"
        )
    # Parsed in bulk: an object per entry cost more than the rest of a read together.
    for i, ((slot, _kind, _num, _s, _pid, _kpad, bucket, _pad), (count,)) in enumerate(
        zip(_HKEY.iter_unpack(keys), _COUNT.iter_unpack(values), strict=True)
    ):
        yield keys[i * _HKEY.size : (i + 1) * _HKEY.size], slot, bucket, count


def _walk_histograms(module: ProbeModule, changed: set[int]) -> None:
    """Every histogram entry of the slots CHANGED, from one walk of the map."""
    walked: dict[bytes, dict[int, int]] = {}
    for raw, slot, bucket, count in hist_entries(module):
        if slot in changed:
            walked.setdefault(raw[:SKEY_SIZE], {})[bucket] = count
    for raw in [r for r in module.buckets if int.from_bytes(r[:4], "little") in changed]:
        del module.buckets[raw]  # keys of these slots the walk no longer shows
    module.buckets.update(walked)


def new_kernel_errors(module: ProbeModule) -> list[str]:
    """A line per kind of error the programs counted since the last call."""
    # One batch read (bcc's values() is a lookup per index, a syscall each).
    keys, values, _n = module.reader("errors").raw()
    counts = [0] * len(module.errors_seen)
    for (i,), (count,) in zip(_INDEX.iter_unpack(keys), _COUNT.iter_unpack(values), strict=True):
        if i < len(counts):
            counts[i] = count
    lines = []
    for i, what in KERNEL_ERRORS.items():
        new = counts[i] - module.errors_seen[i]
        if new > 0 and i not in QUIET_ERRORS:
            names = ", ".join(sorted({r.name for r in module.rows}))
            lines.append(f"{names}: {new} {what}")
    module.errors_seen = counts
    return lines


def update_rates(row: Row, dt: float | None) -> None:
    """Hits per second per key over the last interval, and the row's hits in it."""
    if row.rates_version == row.stats_version and not row.interval_hits:
        return  # no new figures and none in the last interval: every rate stays 0
    row.rates_version = row.stats_version
    hits = 0
    for key, (count, *_rest) in row.stats.items():
        prev = row.last_counts.get(key, 0)
        hits += count - prev
        row.rates[key] = (count - prev) / dt if dt else 0.0
        row.last_counts[key] = count
    row.interval_hits = hits
    if row.count_class is not None:  # sampled: each timed hit is in the histograms once
        timed = sum(sum(h.values()) for h in row.hist.values())
        row.interval_timed, row.last_timed = timed - row.last_timed, timed


def reap_dead_threads(module: ProbeModule) -> None:
    """Drop the interval stacks of threads that have exited (the map would fill up)."""
    stacks = module.bpf["stacks"]
    for key in list(stacks.keys()):
        tgid, tid = key.tid >> 32, key.tid & 0xFFFFFFFF
        if not os.path.exists(f"/proc/{tgid}/task/{tid}"):
            with contextlib.suppress(KeyError):
                del stacks[key]


def bpf_run_ns(row: Row) -> float | None:
    """Mean kernel run time of the row's programs per hit, from their fdinfo (with
    kernel.bpf_stats on); None when none has run or the module is gone."""
    if row.module is None or row.module.closed:
        return None
    total = 0.0
    for fn in row.fns:
        f = row.module.bpf.funcs.get(fn.encode()) or row.module.bpf.funcs.get(fn)
        if f is None:
            continue
        run_ns, run_cnt = ov.prog_run_stats(f.fd)
        if run_cnt:
            total += run_ns / run_cnt
    return total or None
