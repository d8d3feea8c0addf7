"""Offsets of kernel struct members, read from the running kernel's own BTF
(/sys/kernel/btf/vmlinux).

The programs are compiled once, with no kernel's headers; a program that reads a kernel
struct takes its offsets from here, set as its read-only config before load: the
running kernel's description of itself.
"""

from __future__ import annotations

import ctypes as ct
import threading

from adaptyst_top.collectors.probes.bpf import libbpf

VMLINUX = "/sys/kernel/btf/vmlinux"

# BTF kinds (include/uapi/linux/btf.h): the ones a member is looked for in.
_STRUCT, _UNION = 4, 5
_TYPE_HEAD = 12  # struct btf_type: name_off, info, size; its members follow
_MEMBER = ct.c_uint32 * 3  # struct btf_member: name_off, type, offset


class BTFError(Exception):
    """No BTF, or it does not have what was asked for."""


# Every member the programs read: one parse of the kernel's BTF answers them all, and
# its ~6 MiB are freed at once (kept, they stayed in the agent's core for its life).
KNOWN: tuple[tuple[str, str], ...] = (
    *(("cred", n) for n in ("uid", "gid", "suid", "sgid", "euid", "egid", "cap_permitted")),
    ("task_struct", "mm"),
    ("task_struct", "real_cred"),
    ("task_struct", "se"),
    ("task_struct", "thread"),
    ("mm_struct", "flags"),
    ("sched_entity", "exec_start"),
    ("sched_entity", "sum_exec_runtime"),
    ("thread_struct", "fsbase"),
)

_lock = threading.Lock()
_offsets: dict[tuple[str, str, str], int | None] = {}  # (path, struct, member): bytes


def member_offset(struct_name: str, member: str, path: str = VMLINUX) -> int:
    """The byte offset of MEMBER in `struct STRUCT_NAME`, looking inside the anonymous
    structs and unions it is wrapped in (task_struct's randomized part, mm_struct's)."""
    key = (path, struct_name, member)
    with _lock:
        if key not in _offsets:
            wanted = {key, *((path, s, m) for s, m in KNOWN)} - _offsets.keys()
            _offsets.update(_parsed(path, wanted))
        found = _offsets[key]
    if found is None:
        raise BTFError(f"struct {struct_name} has no member {member} in {path}")
    return found


def _parsed(path: str, wanted: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], int | None]:
    """WANTED's offsets from one parse of PATH (libbpf's, in C: ~10x faster than walking
    it in Python), freed before returning."""
    try:
        so = libbpf.lib()
    except OSError as exc:
        raise BTFError(f"libbpf.so.1: {exc}") from None
    btf = so.btf__parse(path.encode(), None)
    if not btf:
        raise BTFError(f"{path}: cannot be read as BTF")
    try:
        found: dict[tuple[str, str, str], int | None] = {}
        for key in wanted:
            tid = so.btf__find_by_name_kind(btf, key[1].encode(), _STRUCT)
            bits = _find(btf, tid, key[2]) if tid > 0 else None
            found[key] = None if bits is None else bits // 8
        return found
    finally:
        so.btf__free(btf)


def _find(btf: int, type_id: int, member: str) -> int | None:
    """MEMBER's bit offset in the struct or union TYPE_ID (recursing into anonymous
    members), or None."""
    so = libbpf.lib()
    t = so.btf__type_by_id(btf, type_id)
    if not t:
        return None
    info = ct.c_uint32.from_address(t + 4).value
    if (info >> 24) & 0x1F not in (_STRUCT, _UNION):
        return None
    bitfields = bool(info & 0x80000000)
    want = member.encode()
    for i in range(info & 0xFFFF):
        name_off, inner, offset = _MEMBER.from_address(t + _TYPE_HEAD + 12 * i)
        bits = offset & 0xFFFFFF if bitfields else offset
        if name_off and so.btf__name_by_offset(btf, name_off) == want:
            return int(bits)
        if not name_off:
            found = _find(btf, inner, member)
            if found is not None:
                return int(bits + found)
    return None


def struct_layout(path: str, struct_name: str) -> tuple[int, dict[str, int]]:
    """`struct STRUCT_NAME` in PATH's BTF (a compiled object's, or the kernel's): its size
    and each named member's byte offset, for checking a layout both sides declare."""
    so = libbpf.lib()
    btf = so.btf__parse(path.encode(), None)
    if not btf:
        raise BTFError(f"{path}: cannot be read as BTF")
    try:
        tid = so.btf__find_by_name_kind(btf, struct_name.encode(), _STRUCT)
        t = so.btf__type_by_id(btf, tid) if tid > 0 else None
        if not t:
            raise BTFError(f"{path} has no struct {struct_name}")
        info, size = ct.c_uint32.from_address(t + 4).value, ct.c_uint32.from_address(t + 8).value
        bitfields = bool(info & 0x80000000)
        members = {}
        for i in range(info & 0xFFFF):
            name_off, _, offset = _MEMBER.from_address(t + _TYPE_HEAD + 12 * i)
            name = so.btf__name_by_offset(btf, name_off).decode()
            members[name] = (offset & 0xFFFFFF if bitfields else offset) // 8
        return size, members
    finally:
        so.btf__free(btf)
