"""Where the agent's metrics go: served on /metrics (agent/exporter/http.py,
OpenMetrics when asked for) or written for node_exporter's textfile collector; the
registry with the agent's own process figures beside ours."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, write_to_textfile

from adaptyst_top.agent.exporter import http as metrics_http
from adaptyst_top.agent.exporter.collector import AgentCollector
from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.collectors.devices.sweep import DeviceSweep
from adaptyst_top.snapshot import DeviceReading

TEXTFILE_NAME = "adaptyst_top.prom"
TEXTFILE_PERIOD_S = 15.0


def registry_for(collector: AgentCollector) -> CollectorRegistry:
    """Our metrics and the agent's own process (CPU seconds, memory: process_*)."""
    from prometheus_client import ProcessCollector

    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    return registry


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (a bare :PORT or PORT listens on every address)."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--metrics {text!r}: give HOST:PORT, e.g. 0.0.0.0:9464")
    return host.strip("[]") or "0.0.0.0", int(port)


def serve(registry: CollectorRegistry, listen: str) -> Callable[[], None]:
    """Serve /metrics (agent/exporter/http.py); returns what stops it."""
    host, port = parse_listen(listen)
    return metrics_http.serve(registry, host, port)


class TextfileWriter:
    """DIR/adaptyst_top.prom rewritten every period, atomically (prometheus-client writes
    a temporary file in DIR and renames it): node_exporter never reads half a file."""

    def __init__(self, registry: CollectorRegistry, directory: Path, period: float) -> None:
        st = os.stat(directory)  # the admin's folder: never one another user could swap
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise ValueError(
                f"--textfile {directory}: must be ours and writable by no one else "
                "(node_exporter's textfile folder, owned by root)"
            )
        self.registry = registry
        self.path = directory / TEXTFILE_NAME
        self.period = period
        self._stop = threading.Event()
        self.write()
        self._thread = threading.Thread(target=self._run, name="metrics-textfile", daemon=True)
        self._thread.start()

    def write(self) -> None:
        write_to_textfile(str(self.path), self.registry)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with contextlib.suppress(OSError):
                self.write()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def node_devices(power_model: PowerModel | None = None) -> Callable[[], list[DeviceReading]]:
    """The node's devices, read at each call (one sweep for the agent's life)."""
    sweep = DeviceSweep(pid=None, power_model=power_model)
    lock = threading.Lock()

    def read() -> list[DeviceReading]:
        with lock:
            return sweep.read()

    return read


__all__ = ["TextfileWriter", "node_devices", "parse_listen", "registry_for", "serve"]
