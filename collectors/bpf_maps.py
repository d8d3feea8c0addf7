"""Reading a whole BPF hash map per interval, cheaply.

bcc's items_lookup_batch allocates key and value arrays for the map's maximum size
on every call (megabytes for a large histogram map); this reader keeps its buffers
and sizes them to what the map really holds. Older kernels without batch lookups
fall back to bcc's per-key iteration.
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
        if self.batch_ok:
            try:
                return self._batch()
            except OSError:
                self.batch_ok = False
        return list(self.table.items())

    def _batch(self) -> list[tuple[Any, Any]]:
        from bcc.libbcc import lib  # type: ignore[import-not-found]

        out: list[tuple[Any, Any]] = []
        in_batch, out_batch, count = ct.c_uint32(0), ct.c_uint32(0), ct.c_uint32(0)
        first = True
        key_t, leaf_t = self.table.Key, self.table.Leaf
        while True:
            count.value = self.capacity
            res = lib.bpf_lookup_batch(
                self.table.map_fd,
                None if first else ct.byref(in_batch),
                ct.byref(out_batch),
                ct.byref(self.keys),
                ct.byref(self.values),
                ct.byref(count),
            )
            err = ct.get_errno()
            n = count.value
            # Copies: the buffers are overwritten by the next call. (An element of an
            # array of a simple ctypes type comes out as a plain int already.)
            for i in range(n):
                v = self.values[i]
                if isinstance(v, ct.Structure):
                    v = leaf_t.from_buffer_copy(v)
                out.append((key_t.from_buffer_copy(self.keys[i]), v))
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
        if len(out) >= self.capacity // 2 and self.capacity < self.table.max_entries:
            self._alloc(min(self.table.max_entries, self.capacity * 2))  # room to grow
        return out
