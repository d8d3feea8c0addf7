"""One real uprobe, end to end; run as a child process by the doctor.

Prints one JSON line: {"ok": bool, "hits": n, "calls": n} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import sys

PROGRAM = r"""
BPF_ARRAY(hits, u64, 1);
int on_getpid(struct pt_regs *ctx) {
    u32 k = 0;
    u64 *v = hits.lookup(&k);
    if (v) __sync_fetch_and_add(v, 1);
    return 0;
}
"""


def main() -> int:
    calls = 100
    try:
        from bcc import BPF  # type: ignore[import-not-found]

        bpf = BPF(text=PROGRAM)
        bpf.attach_uprobe(name="c", sym="getpid", fn_name="on_getpid", pid=-1)
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        for _ in range(calls):
            libc.getpid()
        hits = int(bpf["hits"][ctypes.c_uint32(0)].value)
        bpf.cleanup()
    except Exception as exc:  # any failure is the answer this program exists to give
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        print(json.dumps({"ok": False, "error": msg}))
        return 1
    print(json.dumps({"ok": hits >= calls, "hits": hits, "calls": calls}))
    return 0 if hits >= calls else 1


if __name__ == "__main__":
    sys.exit(main())
