"""Which BPF programs are loaded on the machine, by name, straight from bpf(2)."""

from __future__ import annotations

import ctypes
import os
import re
import uuid
from collections.abc import Callable

_NR_BPF = 321  # x86-64
_PROG_GET_NEXT_ID = 11
_PROG_GET_FD_BY_ID = 13
_OBJ_GET_INFO_BY_FD = 15
_libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_uint32]) -> int:
    return int(_libc.syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr)))


def loaded_program_names() -> list[str]:
    return [name for _id, name, _ns, _cnt in _programs()]


def loaded_programs() -> list[tuple[str, int, int]]:
    """(name, run_time_ns, run_cnt) of every loaded program (run figures need
    kernel.bpf_stats_enabled)."""
    return [(name, ns, cnt) for _id, name, ns, cnt in _programs()]


def _programs() -> list[tuple[int, str, int, int]]:
    progs: list[tuple[int, str, int, int]] = []
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
            progs.append((prog_id, name, run_ns, run_cnt))
        os.close(fd)


# Other eBPF users may share the node (the agent serving someone, another user's
# monitor as root): a test checks only the objects its own run made. Ours are held by
# this process, its descendants, or a process carrying this run's tag in its
# environment (tmux's server and Slurm's step daemons are re-parented away from us but
# inherit it); a program no process holds is ours only if it was not there when the run
# began (a leak, or one the kernel is still freeing).
RUN_TAG = "ADAPTYST_TOP_TEST_RUN"
os.environ.setdefault(RUN_TAG, uuid.uuid4().hex)
_AT_START = {prog_id for prog_id, *_ in _programs()}
_EVENTS_AT_START: set[str] = set()


def _processes() -> dict[int, int]:
    """PID -> parent PID of every process now."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            out[int(entry)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return out


def _tagged(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    return f"{RUN_TAG}={os.environ[RUN_TAG]}".encode() in env.split(b"\0")


def our_processes() -> set[int]:
    parents = _processes()
    ours = {os.getpid()} | {pid for pid in parents if _tagged(pid)}
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in ours and pid not in ours}
        ours |= more
        grew = bool(more)
    return ours


def _holders() -> dict[int, set[int]]:
    """Program id -> the PIDs holding an fd of it (the program's own fd or a link's)."""
    held: dict[int, set[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fdinfo")
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{entry}/fdinfo/{fd}") as f:
                    text = f.read()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("prog_id:"):
                    held.setdefault(int(line.split()[1]), set()).add(int(entry))
    return held


def our_programs() -> list[str]:
    """Names of this run's programs loaded now: this tool names all of them at_* (bcc
    names a program after its function)."""
    return [name for _id, name in _ours(lambda n: n.startswith("at_"))]


def programs_held_by_us(name: str) -> int:
    """How many programs named NAME this run holds now."""
    return len(_ours(lambda n: n == name))


def _ours(match: Callable[[str], bool]) -> list[tuple[int, str]]:
    progs = [(i, n) for i, n, *_ in _programs() if match(n)]
    if not progs:
        return []
    holders, mine = _holders(), our_processes()
    return [
        (i, n)
        for i, n in progs
        if holders.get(i, set()) & mine or (not holders.get(i) and i not in _AT_START)
    ]


def uprobe_event_lines() -> list[str]:
    """This run's uprobe events in tracefs: libbcc and libbpf name each after the process
    that made it (`..._bcc_PID`, `libbpf_PID_...`); one whose process is gone is a leak of whoever made it, and
    counted as ours only if it was not there when the run began."""
    mine = None
    out = []
    for line in _event_lines():
        if line in _EVENTS_AT_START:
            continue
        m = re.search(r"_bcc_(\d+)\s|libbpf_(\d+)_", line + " ")
        if m is None:
            continue
        if mine is None:
            mine = our_processes()
        pid = int(m.group(1) or m.group(2))
        if pid in mine or not os.path.exists(f"/proc/{pid}"):
            out.append(line)
    return out


def _event_lines() -> list[str]:
    try:
        with open("/sys/kernel/tracing/uprobe_events") as f:
            return [line for line in f.read().splitlines() if line.strip()]
    except OSError:
        return []


_EVENTS_AT_START.update(_event_lines())


def none_left(timeout: float = 20.0) -> bool:
    """No program of ours loaded, allowing for the kernel's deferred free after a process dies
    (a multi-uprobe link waits out an RCU grace period, seen past 10 s on a busy machine)."""
    import time

    deadline = time.monotonic() + timeout
    while our_programs():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
