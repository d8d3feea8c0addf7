"""Reading a whole BPF hash map per interval, cheaply.

A batch lookup into arrays sized for the map's maximum would take megabytes for a large
histogram map on every call; this reader keeps its buffers and sizes them to what the
map really holds. Older kernels without batch lookups fall back to per-key iteration.
"""

from __future__ import annotations

import ctypes as ct
import errno
from typing import Any


class MapReader:
    def __init__(self, table: Any, initial: int = 256) -> None:
        self.table = table
        self.capacity = 0
        self.batch_ok = True
        self._alloc(min(initial, table.max_entries))

    def _alloc(self, n: int) -> None:
        self.capacity = max(1, n)
        self.keys = (self.table.Key * self.capacity)()
        self.values = (self.table.Leaf * self.capacity)()

    def items(self) -> list[tuple[Any, Any]]:
        """Every entry as the map's key and value types."""
        keys, values, n = self.raw()
        key_t, leaf_t = self.table.Key, self.table.Leaf
        ks, vs = ct.sizeof(key_t), ct.sizeof(leaf_t)
        return [
            (key_t.from_buffer_copy(keys, i * ks), leaf_t.from_buffer_copy(values, i * vs))
            for i in range(n)
        ]

    def raw(self) -> tuple[bytes, bytes, int]:
        """Every entry's key bytes and value bytes, each concatenated, and how many: what
        a caller that parses them in bulk (struct.iter_unpack) needs, with no object per
        entry."""
        if self.batch_ok:
            try:
                return self._batch()
            except OSError:
                self.batch_ok = False
        entries = list(self.table.items())
        return (
            b"".join(bytes(k) for k, _ in entries),
            b"".join(bytes(v) for _, v in entries),
            len(entries),
        )

    def _batch(self) -> tuple[bytes, bytes, int]:
        keys, values, total = bytearray(), bytearray(), 0
        in_batch, out_batch, count = ct.c_uint32(0), ct.c_uint32(0), ct.c_uint32(0)
        first = True
        ks, vs = ct.sizeof(self.table.Key), ct.sizeof(self.table.Leaf)
        while True:
            count.value = self.capacity
            res, err = _lookup_batch(
                self.table,
                None if first else ct.byref(in_batch),
                ct.byref(out_batch),
                ct.byref(self.keys),
                ct.byref(self.values),
                ct.byref(count),
            )
            n = count.value
            # Copies: the buffers are overwritten by the next call.
            keys += ct.string_at(ct.addressof(self.keys), n * ks)
            values += ct.string_at(ct.addressof(self.values), n * vs)
            total += n
            if res == 0:
                in_batch.value = out_batch.value
                first = False
                continue
            if err == errno.ENOENT:
                break
            if err == errno.ENOSPC and self.capacity < self.table.max_entries:
                # One hash bucket holds more than the buffer: grow and start over.
                self._alloc(min(self.table.max_entries, self.capacity * 4))
                return self._batch()
            raise OSError(err, f"BPF_MAP_LOOKUP_BATCH: {errno.errorcode.get(err, err)}")
        if total >= self.capacity // 2 and self.capacity < self.table.max_entries:
            self._alloc(min(self.table.max_entries, self.capacity * 2))  # room to grow
        return bytes(keys), bytes(values), total


def _lookup_batch(table: Any, *args: Any) -> tuple[int, int]:
    """One BPF_MAP_LOOKUP_BATCH: (its result, errno)."""
    return table.lookup_batch(*args)  # type: ignore[no-any-return]
