"""Messages of the control channel: one JSON object per line, versioned.

    {"v": 1, "type": "hello",  "pid": 123, "tasks": ["spmv"]}            app -> monitor
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
        return Message("hello", {"pid": pid, "tasks": tasks})
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
