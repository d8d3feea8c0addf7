"""Offsets of kernel struct members, read from the running kernel's own BTF
(/sys/kernel/btf/vmlinux).

bcc compiles against the headers installed, which need not be the running kernel's
(here: 6.1 headers under a 6.18 kernel), so a probe that reads a kernel struct takes
its offsets from here instead: the kernel's description of itself.
"""

from __future__ import annotations

import functools
import struct

VMLINUX = "/sys/kernel/btf/vmlinux"
_MAGIC = 0xEB9F

# BTF kinds (include/uapi/linux/btf.h) and the bytes that follow a type of each kind.
_STRUCT, _UNION = 4, 5
_EXTRA_FIXED = {1: 4, 3: 12, 14: 4, 17: 4}  # INT, ARRAY, VAR, DECL_TAG
_EXTRA_PER_MEMBER = {
    4: 12,
    5: 12,
    6: 8,
    13: 8,
    15: 12,
    19: 12,
}  # + ENUM, FUNC_PROTO, DATASEC, ENUM64


class BTFError(Exception):
    """No BTF, or it does not have what was asked for."""


@functools.lru_cache(maxsize=1)
def _types(path: str) -> tuple[bytes, bytes, list[tuple[int, int, int, int]]]:
    """The string section and every type as (kind, name_off, first member byte, vlen)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise BTFError(f"{path}: {exc.strerror}") from None
    if len(data) < 24 or struct.unpack_from("<H", data)[0] != _MAGIC:
        raise BTFError(f"{path}: not little-endian BTF")
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", data, 4)
    strings = data[hdr_len + str_off : hdr_len + str_off + str_len]
    types: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)]  # type 0 is void
    pos, end = hdr_len + type_off, hdr_len + type_off + type_len
    unpack = struct.Struct("<3I").unpack_from
    while pos < end:
        name_off, info, _ = unpack(data, pos)
        kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
        pos += 12
        types.append((kind, name_off, pos, vlen | (info & 0x80000000)))
        pos += _EXTRA_FIXED.get(kind, 0) + _EXTRA_PER_MEMBER.get(kind, 0) * vlen
    return data, strings, types


def _name(strings: bytes, off: int) -> str:
    return strings[off : strings.index(b"\0", off)].decode()


def member_offset(struct_name: str, member: str, path: str = VMLINUX) -> int:
    """The byte offset of MEMBER in `struct STRUCT_NAME`, looking inside the anonymous
    structs and unions it is wrapped in (task_struct's randomized part, mm_struct's)."""
    data, strings, types = _types(path)
    for kind, name_off, at, vlen in types:
        if kind == _STRUCT and name_off and _name(strings, name_off) == struct_name:
            found = _find(data, strings, types, at, vlen, member)
            if found is not None:
                return found // 8
    raise BTFError(f"struct {struct_name} has no member {member} in {path}")


def _find(
    data: bytes,
    strings: bytes,
    types: list[tuple[int, int, int, int]],
    at: int,
    vlen: int,
    member: str,
) -> int | None:
    """MEMBER's bit offset among the members at AT (recursing into anonymous ones)."""
    bitfields = bool(vlen & 0x80000000)
    for i in range(vlen & 0xFFFF):
        name_off, type_id, offset = struct.unpack_from("<3I", data, at + 12 * i)
        bits = offset & 0xFFFFFF if bitfields else offset
        if name_off and _name(strings, name_off) == member:
            return int(bits)
        if not name_off and type_id < len(types):
            kind, _, inner_at, inner_vlen = types[type_id]
            if kind in (_STRUCT, _UNION):
                inner = _find(data, strings, types, inner_at, inner_vlen, member)
                if inner is not None:
                    return int(bits + inner)
    return None
