"""What moving a task's data to a device costs: paid once by a move, spread over the
runs it serves, and, at its slowest, the part of a device's first run of an input
that moved the data there."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TransferModel:
    """Cost of moving a task's data to another device: latency + bytes / bandwidth."""

    latency_s: float = 20e-6
    bandwidth_bps: float = 8e9
    bytes_per_item: float = 8.0
    # A move is paid once and then serves many runs: it is spread over this many.
    horizon_runs: int = 20
    # What a device's first run of an input may have spent moving it there, at its
    # slowest (PoCL here: a first SpMV run of 45 million nonzeros took 255 ms more than
    # the next ones, 1.4 GB/s): the rest was the run.
    first_run_bandwidth_bps: float = 1e9

    def upload_s(self, size: int) -> float:
        """At most what a first run spent moving an input of `size` items."""
        return self.latency_s + size * self.bytes_per_item / self.first_run_bandwidth_bps

    def cost_s(self, src: str, dst: str, size: int) -> float:
        """The one-time cost of moving the data, per run over the horizon."""
        if src == dst:
            return 0.0
        return (
            self.latency_s + size * self.bytes_per_item / self.bandwidth_bps
        ) / self.horizon_runs
