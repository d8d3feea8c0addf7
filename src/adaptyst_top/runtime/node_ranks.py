"""A job's processes' MPI ranks on another node, read there by the user's own process
(`ssh NODE adaptyst-top bridge --ranks PID,...`, agent/bridge.py): root's agent reads
no user's environment. What the node says is believed only as a rank."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence

from adaptyst_top.runtime.remote.transport import ssh_argv
from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.system.mpi_ranks import MAX_RANK
from adaptyst_top.system.readable import readable

MAX_RANKS_ANSWER = 1 << 20  # bytes of its answer
RANKS_TIMEOUT_S = 20.0  # ssh's handshake and the ranks' reading on a node


def ask_ranks(
    node: str, pids: Sequence[int], stop: StopFlag | None = None, timeout: float = RANKS_TIMEOUT_S
) -> dict[int, int | None] | None:
    """The ranks PIDS name on NODE (None for each that names none, or that the node's
    answer does not name as a rank); None where NODE gave no answer: its ssh failed, or
    ended at STOP or after TIMEOUT, or its answer was past MAX_RANKS_ANSWER or not a
    JSON object."""
    if not pids:
        return {}
    try:
        proc = subprocess.Popen(
            ssh_argv(node, "bridge", "--ranks", ",".join(map(str, pids))),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    fd, out = proc.stdout.fileno(), b""
    try:
        while True:  # read to its end, bounded in bytes and time
            if (stop is not None and stop.is_set()) or time.monotonic() > deadline:
                return None
            if readable([fd], 0.2):
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                out += chunk
                if len(out) > MAX_RANKS_ANSWER:
                    return None
        if proc.wait(max(0.1, deadline - time.monotonic())) != 0:
            return None
        told = json.loads(out)
    except (ValueError, RecursionError, subprocess.TimeoutExpired):
        return None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    if not isinstance(told, dict):
        return None
    named: dict[int, int | None] = {}
    for pid in pids:
        rank = told.get(str(pid))
        named[pid] = rank if type(rank) is int and 0 <= rank < MAX_RANK else None
    return named
