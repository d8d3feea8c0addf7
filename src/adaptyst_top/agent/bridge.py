"""`adaptyst-top bridge`: standard input and output joined to this node's agent socket,
for a client on a login node (`ssh NODE adaptyst-top bridge`). The agent sees this
process's user — the one SSH authenticated — and decides as for a local client."""

from __future__ import annotations

import os
import selectors
import socket

CHUNK = 1 << 16
MAX_PIDS = 4096  # a node's ranks asked at once: more than any node runs


def bridge(path: str, stdin: int = 0, stdout: int = 1) -> int:
    """Copy both ways until either side ends; 0, or 1 when there is no agent (said on
    stderr, which SSH carries back)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        os.write(2, f"adaptyst-top bridge: no agent at {path}: {exc.strerror or exc}\n".encode())
        sock.close()
        return 1
    sel = selectors.DefaultSelector()
    sel.register(stdin, selectors.EVENT_READ, "in")
    sel.register(sock, selectors.EVENT_READ, "agent")
    try:
        while True:
            for key, _ in sel.select():
                if key.data == "in":
                    data = os.read(stdin, CHUNK)
                    if not data:
                        return 0  # the client went: the agent sees the socket close
                    sock.sendall(data)
                else:
                    data = sock.recv(CHUNK)
                    if not data:
                        return 0
                    view = memoryview(data)
                    while view:
                        view = view[os.write(stdout, view) :]
    except OSError:
        return 0  # a side closed mid-copy: the same end
    finally:
        sel.close()
        sock.close()


def print_ranks(pids_text: str, out: int = 1) -> int:
    """The rank each of this user's processes PIDS_TEXT (`1,2,3`) names, as one JSON
    object on OUT (`{"1": 0, "2": null}`): read here, by the user's own process on the
    node, from each one's environment (system/mpi_ranks.py). 2 for a malformed list."""
    import json

    from adaptyst_top.system.mpi_ranks import RankNames

    words = pids_text.split(",")
    if len(words) > MAX_PIDS or not all(w.isdigit() and 0 < int(w) < 1 << 22 for w in words):
        os.write(2, b"adaptyst-top bridge: --ranks takes process IDs: 1,2,3\n")
        return 2
    names = RankNames()
    os.write(out, (json.dumps({w: names.rank_of(int(w)) for w in words}) + "\n").encode())
    return 0
