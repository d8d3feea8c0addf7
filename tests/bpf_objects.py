"""Which BPF programs are loaded on the machine, by name, straight from bpf(2)."""

from __future__ import annotations

import ctypes
import os

_NR_BPF = 321  # x86-64
_PROG_GET_NEXT_ID = 11
_PROG_GET_FD_BY_ID = 13
_OBJ_GET_INFO_BY_FD = 15
_libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_uint32]) -> int:
    return int(_libc.syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr)))


def loaded_program_names() -> list[str]:
    return [name for name, _ns, _cnt in loaded_programs()]


def loaded_programs() -> list[tuple[str, int, int]]:
    """(name, run_time_ns, run_cnt) of every loaded program (run figures need
    kernel.bpf_stats_enabled)."""
    progs: list[tuple[str, int, int]] = []
    prog_id = 0
    while True:
        attr = (ctypes.c_uint32 * 16)(prog_id)
        if _bpf(_PROG_GET_NEXT_ID, attr) != 0:
            return progs
        prog_id = attr[1]  # next_id follows start_id
        get = (ctypes.c_uint32 * 16)(prog_id)
        fd = _bpf(_PROG_GET_FD_BY_ID, get)
        if fd < 0:
            continue
        info = (ctypes.c_uint8 * 256)()
        info_attr = (ctypes.c_uint32 * 16)()
        info_attr[0] = fd
        info_attr[1] = ctypes.sizeof(info)
        ptr = ctypes.addressof(info)
        info_attr[2] = ptr & 0xFFFFFFFF
        info_attr[3] = ptr >> 32
        if _bpf(_OBJ_GET_INFO_BY_FD, info_attr) == 0:
            name = bytes(info[64:80]).split(b"\0", 1)[0].decode()
            run_ns = int.from_bytes(bytes(info[192:200]), "little")
            run_cnt = int.from_bytes(bytes(info[200:208]), "little")
            progs.append((name, run_ns, run_cnt))
        os.close(fd)


def our_programs() -> list[str]:
    """Programs this tool loads are all named at_* (bcc names a program after its function)."""
    return [n for n in loaded_program_names() if n.startswith("at_")]


def uprobe_event_lines() -> list[str]:
    try:
        with open("/sys/kernel/tracing/uprobe_events") as f:
            return [line for line in f.read().splitlines() if line.strip()]
    except OSError:
        return []


def none_left(timeout: float = 5.0) -> bool:
    """No program of ours loaded, allowing for the kernel's deferred free after a process dies."""
    import time

    deadline = time.monotonic() + timeout
    while our_programs():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
