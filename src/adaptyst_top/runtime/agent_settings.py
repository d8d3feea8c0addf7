"""The node agent's settings: one typed model, its defaults and ranges declared once, read
from /etc/adaptyst-top/agent.toml (systemd/agent.toml states every default).

The per-user bounds keep one user from crowding out the others on a 2-core node; the
figures behind each default are in docs/safety.md."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from adaptyst_top.runtime.agent_defaults import DEFAULT_SOCKET
from adaptyst_top.runtime.limits import INTERVAL_RANGE
from adaptyst_top.runtime.toml_file import read_toml

DEFAULT_CONFIG = Path("/etc/adaptyst-top/agent.toml")
PROBE_EXPORTS = ("none", "jobs", "all")


def _range(lo: float, hi: float) -> dict[str, Any]:
    return {"range": (lo, hi)}


@dataclass(frozen=True)
class AgentSettings:
    # The socket users' monitors connect to (its folder must be one only root can write).
    socket: str = str(DEFAULT_SOCKET)
    # A group whose members may probe any process, node-wide too, like root ("": none).
    admin_group: str = ""
    # Which users' probes --metrics exports: none, jobs or all. None by default: /metrics
    # needs no login, and function names, keys, users and jobs are the users' business.
    probe_metrics: str = "none"
    # Probe and task label sets per node in the metrics, the least active left out.
    max_probe_series: int = dataclasses.field(default=200, metadata=_range(0, 100_000))
    # Connections of users outside the admin group, all together; root and the admin
    # group have as many again of their own, so a flood of users never locks them out.
    max_clients: int = dataclasses.field(default=256, metadata=_range(1, 10_000))
    max_connections_per_user: int = dataclasses.field(default=16, metadata=_range(1, 10_000))
    # Attach points of one user's sessions together, counted as they attach.
    max_attach_per_user: int = dataclasses.field(default=1000, metadata=_range(1, 100_000))
    # Probe modules (one per spec: ~0.4 MB of locked kernel memory each) and, among them,
    # keyed ones (@argN: ~2.6 MB each, with their keys) of one user's sessions together.
    modules_per_user: int = dataclasses.field(default=64, metadata=_range(1, 10_000))
    keyed_probes_per_user: int = dataclasses.field(default=16, metadata=_range(0, 10_000))
    # A connection that says no hello in this time is closed.
    hello_timeout_s: float = dataclasses.field(default=5.0, metadata=_range(0.1, 600.0))
    # A connection that asks nothing for this long is closed: past the longest refresh
    # interval a client may use, so only a client that stopped asking is.
    idle_timeout_s: float = dataclasses.field(
        default=INTERVAL_RANGE[1] + 60.0, metadata=_range(1.0, 86400.0)
    )

    @property
    def socket_path(self) -> Path:
        return Path(self.socket)


FIELDS = {f.name: f for f in dataclasses.fields(AgentSettings)}


def load_settings(path: str | None) -> AgentSettings:
    """PATH's settings (the default file when it exists, else the defaults); ValueError,
    in one line, for anything wrong in it."""
    file = Path(path) if path else DEFAULT_CONFIG
    if path is None and not file.exists():
        return AgentSettings()
    _, data = read_toml(file)
    return settings_from(data, str(file))


def settings_from(data: dict[str, Any], where: str) -> AgentSettings:
    values: dict[str, Any] = {}
    for key, given in data.items():
        value: Any = given
        f = FIELDS.get(key)
        if f is None:
            raise ValueError(f"{where}: unknown key {key!r} (known: {', '.join(FIELDS)})")
        kind = type(f.default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not kind:
            words = {str: "a string", int: "a whole number", float: "a number"}[kind]
            raise ValueError(f"{where}: {key} must be {words}")
        if "range" in f.metadata:
            lo, hi = f.metadata["range"]
            if not (math.isfinite(cast(float, value)) and lo <= value <= hi):
                raise ValueError(f"{where}: {key} must be in {lo:g}..{hi:g}, not {value!r}")
        values[key] = value
    if values.get("probe_metrics", "none") not in PROBE_EXPORTS:
        raise ValueError(f"{where}: probe_metrics must be none, jobs or all")
    return AgentSettings(**values)
