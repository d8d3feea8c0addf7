"""The node agent's wire format: one JSON object per line over a Unix socket.

    client -> agent                                 agent -> client
    {"v": 1, "type": "hello"}                       {"v": 1, "type": "hello", "uid": U}
    {"type": "open", "pid": P, "probes": [SPEC],    {"type": "ok"}
     "budget": F, "enforce_budget": B,              or {"type": "error", "message": LINE}
     "max_probes": N, "command_path": PATH}
    {"type": "snapshot", "with_hist": B}            {"type": "snapshot", "snapshot": {...}}
    {"type": "add", "spec": SPEC}                   {"type": "ok"}
    {"type": "toggle", "ref": [G, R, K]}            {"type": "ok", "on": B}
    {"type": "remove", "ref": [G, R, K]}            {"type": "ok", "spec": SPEC}
    {"type": "candidates"}                          {"type": "ok", "specs": [SPEC],
                                                     "candidates": [{"spec": SPEC,
                                                       "label": L, "refused": WHY}]}
    {"type": "list", "pid": P, "binary": B,         {"type": "ok", "objects": [...],
     "pattern": G, "functions": B, "usdt": B,        "policy_known": B}  (list --json's)
     "all": B}

The snapshot is `Snapshot.to_json()` (snapshot/): the record format. Every
request gets one answer; an error answer is one line for the user. A line that is not
a request (not JSON, too long, an unknown type, a field of the wrong type) gets an
error answer and the connection is closed; the agent goes on.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from adaptyst_top.runtime.limits import check_range

VERSION = 1
MAX_LINE = 1 << 20  # a request; snapshots (agent -> client) may be longer
MAX_SNAPSHOT_LINE = 64 << 20
REQUESTS = ("open", "snapshot", "add", "toggle", "remove", "candidates", "list")


class ProtocolError(ValueError):
    """A message that breaks the protocol, in one line."""


def encode(kind: str, **fields: Any) -> bytes:
    # orjson: a 200-row snapshot in a tenth of json's time, every second, per client.
    return orjson.dumps({"v": VERSION, "type": kind, **fields}) + b"\n"


class Stream(Protocol):
    def recv(self, size: int) -> bytes: ...


class LineReader:
    """Lines from a socket (or any stream with recv), each at most LIMIT bytes (a longer
    one is a ProtocolError)."""

    def __init__(self, sock: Stream, limit: int) -> None:
        self.sock = sock
        self.limit = limit
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no newline

    def read(self) -> dict[str, Any] | None:
        """The next message, or None at the end of the stream. Each byte is looked at
        once and the buffer grows in place: a line past LIMIT is refused in time linear
        in LIMIT (64 MB took 35 s of CPU with a buffer copied at each read)."""
        while (end := self._buf.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._buf)
            if len(self._buf) > self.limit:
                raise ProtocolError(f"a message longer than {self.limit} bytes")
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                if self._buf:
                    raise ProtocolError("the connection ended inside a message")
                return None
            self._buf += chunk
        if end > self.limit:
            raise ProtocolError(f"a message longer than {self.limit} bytes")
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        self._scanned = 0
        return decode(line)


def decode(line: bytes) -> dict[str, Any]:
    try:
        msg = orjson.loads(line)  # UTF-8 checked too
    except (orjson.JSONDecodeError, RecursionError):
        raise ProtocolError("a message that is not JSON") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError("a message without a type")
    return msg


def check_version(msg: dict[str, Any], side: str) -> None:
    """A hello from the other SIDE: ProtocolError, in one line, when versions differ."""
    if msg.get("type") != "hello":
        raise ProtocolError(f"the {side} did not say hello first")
    if not _whole(msg.get("v")) or msg.get("v") != VERSION:  # true == 1 in Python
        raise ProtocolError(
            f"the {side} speaks protocol version {msg.get('v')!r}, this adaptyst-top "
            f"{VERSION}: use the same version on both sides"
        )


def field(
    msg: dict[str, Any], name: str, kind: type | tuple[type, ...], optional: bool = False
) -> Any:
    """MSG[NAME], checked to be of KIND (None allowed when OPTIONAL)."""
    value = msg.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ProtocolError(f"{msg.get('type')}: {name} is missing or of the wrong type")
    return value


def bounded(
    msg: dict[str, Any], name: str, default: float, lo: float, hi: float, whole: bool = False
) -> float:
    """MSG[NAME], a finite number (WHOLE: an integer) in lo..hi (lo excluded when 0), or
    DEFAULT when absent; else ProtocolError."""
    value = field(msg, name, int if whole else (int, float), optional=True)
    if value is None:
        return default
    try:
        return check_range(float(value), lo, hi, f"{msg.get('type')}: {name} ")
    except (ValueError, OverflowError) as exc:
        raise ProtocolError(str(exc)) from None


def _whole(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def ref_field(msg: dict[str, Any]) -> tuple[int | str, int | None, int | str | None]:
    """A toggle's or remove's `ref`: [group, row, key], exactly; else ProtocolError."""
    ref = msg.get("ref")
    if not (
        isinstance(ref, list)
        and len(ref) == 3
        and _whole(ref[0])  # the engine's group id; a recording's spec text is no ref here
        and (ref[1] is None or _whole(ref[1]))
        and (ref[2] is None or _whole(ref[2]) or isinstance(ref[2], str))
    ):
        raise ProtocolError(f"{msg['type']}: ref is not [group, row, key]")
    return ref[0], ref[1], ref[2]
