"""The node agent's settings: one typed model, each key declared once
(runtime/settings_model.py), read from /etc/adaptyst-top/agent.toml; systemd/agent.toml,
written from these declarations, states every default.

The per-user bounds keep one user from crowding out the others on a 2-core node; the
figures behind each default are in docs/safety.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from adaptyst_top.runtime.limits import INTERVAL_RANGE
from adaptyst_top.runtime.remote.defaults import DEFAULT_SOCKET
from adaptyst_top.runtime.settings_model import read_settings, setting
from adaptyst_top.runtime.toml_file import read_toml

if TYPE_CHECKING:
    from adaptyst_top.collectors.devices.cpu import PowerModel

DEFAULT_CONFIG = Path("/etc/adaptyst-top/agent.toml")
PROBE_EXPORTS = ("none", "jobs", "all")
HEADER = """adaptyst-top's node agent: /etc/adaptyst-top/agent.toml. Every key is optional; the
values shown are the defaults (the reasons: docs/safety.md). An unknown key, a wrong
type or a number out of range stops the agent, naming its line."""


@dataclass(frozen=True)
class AgentSettings:
    socket: str = setting(
        str(DEFAULT_SOCKET),
        "The socket users' monitors connect to (its folder must be one only root can write).",
    )
    admin_group: str = setting(
        "", 'A group whose members may probe any process, node-wide too, like root ("": none).'
    )
    energy_groups: list[str] = setting(
        [],
        "Groups whose members get the node's device power and energy counters (RAPL, NVML)\n"
        "as root does. Everyone else gets only the joules charged to their own probes and\n"
        "GPU processes, once a second: the counters leak other users' work (PLATYPUS).",
    )
    probe_metrics: str = setting(
        "none",
        "Which users' probes --metrics exports: none, jobs (probes of Slurm jobs) or all.\n"
        "/metrics needs no login: any local user can read it. none keeps function names,\n"
        "keys, users and jobs out of it; devices, job energy and the agent's own figures stay.",
        choices=PROBE_EXPORTS,
    )
    user_energy_period_s: float = setting(
        60.0,
        "Seconds: a user outside energy_groups sees the joules charged to their own probes\n"
        "and GPU processes as they stood at the last boundary of this period (0: fresh).\n"
        "They are shares of the node's counter: fresh, they give it back (PLATYPUS).",
        range=(0.0, 3600.0),
    )
    metrics_energy_period_s: float = setting(
        60.0,
        "Seconds: devices' power and energy and jobs' joules in the metrics are published\n"
        "at most this often (0: at every scrape). Any local user can read /metrics, and a\n"
        "fresh package counter leaks what others run (PLATYPUS); a minute's figure says\n"
        "little more than the load /proc/stat shows everyone.",
        range=(0.0, 3600.0),
    )
    max_probe_series: int = setting(
        200,
        "Probe and task label sets per node in the metrics; the least active are left out.",
        range=(0, 100_000),
    )
    max_clients: int = setting(
        256,
        "Connections of users outside the admin group, together; root and the admin group\n"
        "have as many again of their own, so a flood of users never locks them out.",
        range=(1, 10_000),
    )
    max_connections_per_user: int = setting(
        16, "The connections one user may have.", range=(1, 10_000)
    )
    spare_workers: bool = setting(
        True,
        "Keep an opener and a parser started ahead, waiting for a user: her first probe\n"
        "takes ~50 ms, not ~150; they hold ~22 MiB (PSS) while they wait.",
    )
    max_workers: int = setting(
        96,
        "Users' worker processes (openers, parsers, unwinders) at once, node-wide: one\n"
        "person connecting under many uids (subordinate ids) cannot fill the node with\n"
        "them. Past half of it, a worker starts at a request, not at a hello. A parser\n"
        "holds ~24 MiB: 96 of them stay under the unit's MemoryMax (2 GiB) with the agent.",
        range=(8, 100_000),
    )
    max_attach_per_user: int = setting(
        1000,
        "Attach points of one user's sessions together, counted as they attach.",
        range=(1, 100_000),
    )
    modules_per_user: int = setting(
        64,
        "Probe modules of one user's sessions together: one per spec, ~0.4 MB of locked\n"
        "kernel memory each.",
        range=(1, 10_000),
    )
    keyed_probes_per_user: int = setting(
        16,
        "Of those, keyed @argN probes (~2.6 MB each, with their keys).",
        range=(0, 10_000),
    )
    hello_timeout_s: float = setting(
        5.0, "Seconds: a connection that says no hello in this time is closed.", range=(0.1, 600.0)
    )
    idle_timeout_s: float = setting(
        INTERVAL_RANGE[1] + 60.0,
        "Seconds: a connection that asks nothing for this long is closed (past the longest\n"
        f"refresh interval a client may use, {INTERVAL_RANGE[1]:g} s).",
        range=(1.0, 86400.0),
    )

    cpu_power_model: str | None = setting(
        None,
        "IDLE_W:MAX_W, the CPU's power estimated from its load where RAPL is missing, for\n"
        "job energy and the joules of users' probes, labelled estimate (unset: none).",
        example="40:180",
    )

    @property
    def socket_path(self) -> Path:
        return Path(self.socket)

    @property
    def power_model(self) -> PowerModel | None:
        """cpu_power_model parsed; ValueError, in one line, when it is not one."""
        if not self.cpu_power_model:
            return None
        # Here, not at the top: the ssh bridge reads these settings on a login node's
        # interpreter, which need not have psutil (the collectors' import).
        from adaptyst_top.collectors.devices.cpu import PowerModel

        try:
            return PowerModel.parse(self.cpu_power_model)
        except ValueError as exc:
            raise ValueError(f"cpu_power_model: {exc}") from None


def load_settings(path: str | None) -> AgentSettings:
    """PATH's settings (the default file when it exists, else the defaults); ValueError,
    in one line, for anything wrong in it."""
    file = Path(path) if path else DEFAULT_CONFIG
    if path is None and not file.exists():
        return AgentSettings()
    text, data = read_toml(file)
    # An admin's typo must not leave a bound at its default unnoticed: refused.
    settings, _ = read_settings(AgentSettings, data, text, str(file), "refuse")
    settings.power_model  # noqa: B018  # checked now, not at the first user's session
    return settings
