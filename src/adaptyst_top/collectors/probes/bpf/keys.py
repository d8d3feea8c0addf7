"""How a statistics key written by the kernel becomes the key a user reads.

A USDT probe split by an argument keys its statistics by that argument: an integer, or
the C string it points to. The BPF program reads the string with
bpf_probe_read_user_str, which cannot fault a page in: a string in a page the target
has not touched yet (its read-only data, on the first hit of a run) cannot be read
there. The kernel then files the hit under the pointer itself, with the process it
came from (KeyKind.PTR); here it is read through /proc/PID/mem, which can fault the page
in, and merged into the string's own key; a process gone by then has its string read
from the probed binary's file where it lay in its read-only bytes (binary_strings.py).
A key is never shown as a pointer: what cannot be read at all is counted under
UNREADABLE.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable
from typing import Any, TypeGuard

from adaptyst_top.collectors.probes.bpf.program import KEYLEN, WHOLE_LEN, KeyKind
from adaptyst_top.collectors.probes.elf.binary_strings import BinaryStrings
from adaptyst_top.snapshot.inert import inert

KEY_BYTES = KEYLEN - 1  # a string key, NUL aside
HASHED_PREFIX = 22  # a long name's key: 22 bytes, '~', 8 hex digits (layer_common.h)
_HEX = frozenset("0123456789abcdef")


def hashed_name(key: object) -> TypeGuard[str]:
    """Whether KEY looks like a long name's key as a device layer makes it (key_text):
    its first bytes, '~' and 8 hex digits (told_name checks it against the bytes)."""
    return (
        isinstance(key, str)
        and len(key) > 9
        and key[-9] == "~"
        and _HEX.issuperset(key[-8:])
        and len(key.encode()) >= KEY_BYTES
    )


def fnv1a(raw: bytes) -> int:
    """FNV-1a, 32 bits: the hash layer_common.h's key_text puts in a long name's key."""
    h = 2166136261
    for b in raw:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def c_text(raw: bytes) -> str:
    """A C string's bytes (to the first NUL) as text safe to show."""
    return inert(raw.split(b"\0", 1)[0].decode(errors="replace"))


def cut_name(whole: bytes, key_hash: int) -> str:
    """A name longer than the names map keeps: its first bytes and its key's hash, so
    that two alike that far stay apart."""
    return c_text(whole[: WHOLE_LEN - 10]) + f"~{key_hash:08x}"


def told_name(key: bytes, value: bytes) -> str | None:
    """The whole name a layer told for KEY (the names map's raw key and value), or None
    when the value is not that key's name: it must start with the key's prefix and hash
    to the key's hash (or, cut at the map's size, start so), so that no process renames
    a row to something else."""
    key, value = key.split(b"\0", 1)[0], value.split(b"\0", 1)[0]
    digits = key[HASHED_PREFIX + 1 :]
    if len(key) != KEY_BYTES or key[HASHED_PREFIX : HASHED_PREFIX + 1] != b"~":
        return None
    if (
        not _HEX.issuperset(digits.decode(errors="replace"))
        or value[:HASHED_PREFIX] != key[:HASHED_PREFIX]
    ):
        return None
    key_hash = int(digits, 16)
    if fnv1a(value) == key_hash:
        return c_text(value)
    return cut_name(value, key_hash) if len(value) >= WHOLE_LEN - 1 else None


# A key's statistics as the kernel keeps them: count, sum, min, max (ns), on-CPU ns.
Stats = tuple[int, int, int, int, int]
NO_STATS: Stats = (0, 0, 0, 0, 0)

UNREADABLE = "<unreadable>"

Key = str | int | None


# Where a user-space string can be: as bpf/module.h's USER_PTR says.
USER_SPACE = (0x10000, 1 << 47)


def read_c_string(
    pid: int,
    address: int,
    limit: int = KEYLEN - 1,
    open_mem: Callable[[int], int | None] | None = None,
) -> bytes | None:
    """At most LIMIT bytes of the C string at ADDRESS in PID, as the kernel's read would
    truncate it; None when nothing can be read there. open_mem: opens the memory of the
    process that was checked (never another that got its PID since)."""
    if not USER_SPACE[0] <= address < USER_SPACE[1]:
        return None  # no user-space address (a negative number read as one)
    if open_mem is not None:
        fd = open_mem(pid)
    else:
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            fd = None
    if fd is None:
        return None
    try:
        # Up to the end of the page first: a string near a page's end is still read.
        first = min(limit + 1, 4096 - address % 4096)
        data = b""
        for want in (first, limit + 1 - first):
            if want <= 0 or b"\0" in data:
                break
            try:
                data += os.pread(fd, want, address + len(data))
            except (OSError, OverflowError, ValueError):
                break
    finally:
        os.close(fd)
    if not data:
        return None
    return data.split(b"\0", 1)[0][:limit]


class KeyResolver:
    """Turns kernel keys into user keys, per slot's argument type (auto, int, str).

    open_mem: opens the memory of a probed process as it was checked, by PID (None: not
    a process of the probes' scope, or gone); unset for node-wide probes. A key's string
    is read from the process that made the hit, never from a later owner of its PID.
    binary: the probed file, for a string the process took with it (None: not read)."""

    def __init__(
        self,
        arg_types: dict[int, str],
        open_mem: Callable[[int], int | None] | None = None,
        binary: BinaryStrings | None = None,
    ) -> None:
        self.arg_types = arg_types
        self.open_mem = open_mem
        self.binary = binary
        self._resolved: dict[tuple[int, int, int], Key] = {}

    def key_of(self, k: Any) -> Key:
        kind = int(k.kind)
        if kind == KeyKind.STR:
            return c_text(bytes(k.str))
        if kind == KeyKind.INT:
            num = int(k.num)  # a register's 64 bits, read as bpftrace reads them: signed
            return num - (1 << 64) if num >> 63 else num
        if kind == KeyKind.PTR:
            # k.str reads as bytes cut at the first NUL: the raw bytes instead (the
            # process, and where the probe fired).
            raw = ctypes.string_at(ctypes.addressof(k) + type(k).str.offset, 16)
            tgid, _, ip = struct.unpack("IIQ", raw)
            slot = int(k.slot)
            return self._resolve(int(tgid), int(k.num), self.arg_types.get(slot, "auto"), slot, ip)
        return None

    def _resolve(self, tgid: int, address: int, arg_type: str, slot: int = 0, ip: int = 0) -> Key:
        cached = self._resolved.get((tgid, address, ip))
        if cached is not None:
            return cached
        pointer = USER_SPACE[0] <= address < USER_SPACE[1]
        text = read_c_string(tgid, address, open_mem=self.open_mem) if pointer else None
        if text is None and self.binary is not None and pointer:
            text = self.binary.string_at(slot, ip, address, KEYLEN - 1)
        if text:  # the same rule as in the kernel: a non-empty string is a string
            key: Key = inert(text.decode(errors="replace"))
        elif text == b"" and arg_type == "str":
            key = ""
        else:
            key = UNREADABLE if arg_type == "str" else address
        if text is not None or not self._alive(tgid):
            self._resolved[(tgid, address, ip)] = key  # settled; retried while it may yet read
        return key

    def _alive(self, tgid: int) -> bool:
        """Whether the process that made the hit can still be read."""
        if self.open_mem is None:
            return os.path.exists(f"/proc/{tgid}")
        fd = self.open_mem(tgid)
        if fd is None:
            return False
        os.close(fd)
        return True


def merge_stats(a: Stats, b: Stats) -> Stats:
    """Two (count, sum, min, max, oncpu) of one user key, filed under two kernel keys."""
    return (a[0] + b[0], a[1] + b[1], min(a[2], b[2]), max(a[3], b[3]), a[4] + b[4])
