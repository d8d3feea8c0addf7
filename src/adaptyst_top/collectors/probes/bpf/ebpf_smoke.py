"""One real uprobe, end to end, the way every probe goes (spec, plan, the precompiled
program loaded by libbpf, attach, read); run as a child process by the doctor.

Prints one JSON line: {"ok": bool, "hits": n, "calls": n} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys


def _libc_path() -> str:
    """The C library this process runs (as its maps name it)."""
    with open(f"/proc/{os.getpid()}/maps") as f:
        for line in f:
            path = line.split(maxsplit=5)[-1].strip()
            if os.path.basename(path).startswith("libc.so"):
                return path
    raise RuntimeError("no C library mapped in this process")


def main() -> int:
    calls = 100
    try:
        from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine

        libc = ctypes.CDLL(_libc_path())
        with ProbeEngine(pid=os.getpid(), follow=False) as engine:
            group = engine.add(f"uprobe:{_libc_path()}:getpid")
            if not engine.wait(30) or group.state != "attached":
                raise RuntimeError(group.error or "the probe did not attach in 30 s")
            for _ in range(calls):
                libc.getpid()
            engine.read()
            hits = sum(e.count for e in engine.snapshot_rows(False))
    except Exception as exc:  # any failure is the answer this program exists to give
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        print(json.dumps({"ok": False, "error": msg}))
        return 1
    print(json.dumps({"ok": hits >= calls, "hits": hits, "calls": calls}))
    return 0 if hits >= calls else 1


if __name__ == "__main__":
    sys.exit(main())
