"""Messages of the control channel: one JSON object per line, versioned.

    {"v": 1, "type": "hello",  "pid": 123, "tasks": ["spmv"],
     "kernels": {"spmv": ["_Z4spmv*"]}}                                   app -> monitor
        (kernels, optional: globs over the device kernels each task launches, so that
        its runs on an accelerator are timed on the device's clock)
    {"v": 1, "type": "assign", "task": "spmv", "device": "opencl:0",
     "reason": "...", "runs": 3}                                           monitor -> app
        (runs, optional: only that many executions there, then back: an exploration)
    {"v": 1, "type": "ack",    "task": "spmv", "device": "opencl:0"}      app -> monitor

Anything else is rejected with a reason (and logged by the receiver), never raised.
Framing, the JSON and the version check are system/line_socket.py's, shared with the
node agent's protocol; this module keeps the control channel's vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from adaptyst_top.system import line_socket
from adaptyst_top.system.line_socket import ProtocolError

VERSION = 1
MAX_LINE = 4096
__all__ = ["MAX_LINE", "VERSION", "Message", "ProtocolError", "decode", "encode"]
_NAME = re.compile(r"[A-Za-z0-9_.:@+-]{1,64}")  # whole names only (fullmatch: "$" allows a newline)
_GLOB = re.compile(r"[A-Za-z0-9_*?\[\]!.~-]{1,128}")  # a kernel name glob, as cuda:/opencl: take
MAX_GLOBS = 8  # a task's kernel globs


@dataclass(frozen=True)
class Message:
    type: str
    fields: dict[str, Any]


def encode(kind: str, **fields: Any) -> bytes:
    return line_socket.encode(VERSION, kind, **fields)


def _name(obj: dict[str, Any], key: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str) or not _NAME.fullmatch(v):
        raise ProtocolError(f"bad {key!r}")
    return v


def kernel_glob_ok(glob: object) -> bool:
    """Whether GLOB may name a task's kernels in a hello."""
    return isinstance(glob, str) and _GLOB.fullmatch(glob) is not None


def _kernels(obj: dict[str, Any], tasks: list[str]) -> dict[str, list[str]]:
    """A hello's kernel globs by task, each a task it names."""
    marks = obj.get("kernels", {})
    if not isinstance(marks, dict) or not all(
        t in tasks
        and isinstance(globs, list)
        and 0 < len(globs) <= MAX_GLOBS
        and all(kernel_glob_ok(g) for g in globs)
        for t, globs in marks.items()
    ):
        raise ProtocolError("bad kernels")
    return {t: list(globs) for t, globs in marks.items()}


def decode(line: bytes) -> Message:
    """A validated message, or ProtocolError saying what is wrong."""
    if len(line) > MAX_LINE:
        raise ProtocolError("line too long")
    obj = line_socket.decode(line)
    if not line_socket.same_version(obj, VERSION):
        raise ProtocolError(f"unsupported version {obj.get('v')!r}")
    kind = obj.get("type")
    if kind == "hello":
        pid = obj.get("pid")
        tasks = obj.get("tasks", [])
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise ProtocolError("bad pid")
        if (
            not isinstance(tasks, list)
            or len(tasks) > 256
            or not all(isinstance(t, str) and _NAME.fullmatch(t) for t in tasks)
        ):
            raise ProtocolError("bad tasks")
        return Message("hello", {"pid": pid, "tasks": tasks, "kernels": _kernels(obj, tasks)})
    if kind in ("assign", "ack"):
        fields: dict[str, Any] = {"task": _name(obj, "task"), "device": _name(obj, "device")}
        reason = obj.get("reason", "")
        if not isinstance(reason, str) or len(reason) > 512:
            raise ProtocolError("bad reason")
        fields["reason"] = reason
        runs = obj.get("runs")
        if runs is not None and (
            not isinstance(runs, int) or isinstance(runs, bool) or not 0 < runs <= 1000
        ):
            raise ProtocolError("bad runs")
        fields["runs"] = runs
        return Message(kind, fields)
    raise ProtocolError(f"unknown type {kind!r}")
