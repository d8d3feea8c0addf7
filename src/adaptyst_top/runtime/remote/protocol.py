"""The node agent's wire format: one JSON object per line over a Unix socket.

    client -> agent                                 agent -> client
    {"v": 1, "type": "hello"}                       {"v": 1, "type": "hello", "uid": U}
    {"type": "open", "pid": P, "probes": [SPEC],    {"type": "ok"}
     "budget": F, "enforce_budget": B,              or {"type": "error", "message": LINE}
     "max_probes": N, "command_path": PATH,
     "profile_hz": H}
    {"type": "profile", "pid": P, "hz": H}          {"type": "ok"}  (profile P from now on)
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

from dataclasses import dataclass
from typing import Any

from adaptyst_top.collectors.probes.cost.overhead import DEFAULT_BUDGET, DEFAULT_MAX_ATTACH
from adaptyst_top.collectors.profile import DEFAULT_HZ, HZ_RANGE
from adaptyst_top.runtime.limits import BUDGET_RANGE, MAX_PROBES_RANGE, check_range
from adaptyst_top.system import line_socket
from adaptyst_top.system.line_socket import LineReader, ProtocolError, decode

VERSION = 1
MAX_LINE = 1 << 20  # a request; snapshots (agent -> client) may be longer
MAX_SNAPSHOT_LINE = 64 << 20
REQUESTS = ("open", "snapshot", "add", "toggle", "remove", "candidates", "list", "profile")
# Framing, caps and the version check are system/line_socket.py's, shared with the
# placement control channel; this module keeps the agent's vocabulary.
__all__ = ["LineReader", "ProtocolError", "check_version", "decode", "encode"]


def encode(kind: str, **fields: Any) -> bytes:
    return line_socket.encode(VERSION, kind, **fields)


def check_version(msg: dict[str, Any], side: str) -> None:
    """A hello from the other SIDE: ProtocolError, in one line, when versions differ."""
    line_socket.check_hello(msg, side, VERSION)


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


def profile_rate(msg: dict[str, Any]) -> int | None:
    """A request's profile rate (`open`'s profile_hz, `profile`'s hz): absent, or whole
    samples a second in HZ_RANGE; else ProtocolError."""
    name = "profile_hz" if msg["type"] == "open" else "hz"
    if msg.get(name) is None:
        return None
    return int(bounded(msg, name, DEFAULT_HZ, *HZ_RANGE, whole=True))


@dataclass(frozen=True)
class OpenRequest:
    """An `open`'s fields, each checked (what the agent and a job's relay both take)."""

    pid: int | None
    job: str | None
    ranks: bool
    probes: list[str]
    command_path: str | None
    profile_hz: int | None
    budget: float
    enforce_budget: bool
    max_probes: int


def open_request(msg: dict[str, Any]) -> OpenRequest:
    """MSG's fields as an open asks them; ProtocolError for one of the wrong type or range."""
    probes = field(msg, "probes", list)
    if not all(isinstance(p, str) for p in probes):
        raise ProtocolError("open: probes is not a list of strings")
    return OpenRequest(
        pid=field(msg, "pid", int, optional=True),
        job=field(msg, "job", str, optional=True),
        ranks=field(msg, "ranks", bool, optional=True) is True,
        probes=probes,
        command_path=field(msg, "command_path", str, optional=True),
        profile_hz=profile_rate(msg),
        # A fraction on the wire; the command line's percent range.
        budget=bounded(msg, "budget", DEFAULT_BUDGET, BUDGET_RANGE[0], BUDGET_RANGE[1] / 100),
        enforce_budget=bool(msg.get("enforce_budget")),
        max_probes=int(
            bounded(msg, "max_probes", DEFAULT_MAX_ATTACH, *MAX_PROBES_RANGE, whole=True)
        ),
    )
