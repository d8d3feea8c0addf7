"""Energy accounting, one rule for every source.

Prefer a hardware energy counter: add its deltas. A counter with a known range
(RAPL's max_energy_range_uj) that goes backwards wrapped when the wrapped delta is
plausible; one that goes backwards otherwise was reset (the energy since the reset
is its new value). A counter that stops moving while power is drawn is stale: the
interval is integrated from power instead (trapezoid, monotonic clock). With no
counter at all, power is integrated. Every figure names its source.

A counter that is costly to read (NVML's takes ~3 ms of CPU on an H200) may be read
less often than power: between two readings power is integrated provisionally, and
the next reading replaces that estimate with the counter's delta. The energy shown
never goes backwards (job accounting and Prometheus counters take differences): where
the counter comes in below the estimate, the figure holds until the counter passes it.
"""

from __future__ import annotations

from adaptyst_top.snapshot import EnergyReading
from adaptyst_top.snapshot.devices import EnergyMethod as Method
from adaptyst_top.snapshot.devices import EnergySource

# A wrap implying more than this is treated as a reset: no single device draws it.
MAX_PLAUSIBLE_W = 5000.0
STALE_AFTER_S = 3.0


class EnergyAccount:
    def __init__(self, source: EnergySource) -> None:
        self.counter_source = source
        self.total_j = 0.0
        self.source: EnergySource | None = None
        self.method: Method | None = None
        self._last_t: float | None = None
        self._last_counter: float | None = None
        self._last_power: float | None = None
        self._counter_moved_t: float | None = None
        self._last_counter_t: float | None = None
        self._counted_j = 0.0  # energy as of the last counter reading: never an estimate
        self._shown_j = 0.0
        self.resets = 0
        self.wraps = 0

    def update(
        self,
        now: float,
        counter_j: float | None = None,
        power_w: float | None = None,
        counter_range_j: float | None = None,
    ) -> EnergyReading:
        """Feed one sample (monotonic seconds); returns energy since the first sample."""
        if self._last_t is None:
            self._last_t, self._last_counter, self._last_power = now, counter_j, power_w
            self._counter_moved_t = self._last_counter_t = now
            self.method = (
                "counter" if counter_j is not None else ("power" if power_w is not None else None)
            )
            self.source = self.counter_source if self.method else None
            return EnergyReading(0.0 if self.source else None, power_w, self.source, self.method)
        dt = now - self._last_t
        delta: float | None = None
        counter_dt = now - (self._last_counter_t if self._last_counter_t is not None else now)
        if counter_j is not None and self._last_counter is not None:
            delta = self._counter_delta(self._last_counter, counter_j, counter_dt, counter_range_j)
            stale = (
                delta == 0.0
                and power_w is not None
                and power_w > 0
                and self._counter_moved_t is not None
                and now - self._counter_moved_t >= STALE_AFTER_S
            )
            if delta != 0.0:
                self._counter_moved_t = now
            if stale:
                delta = None  # fall back to power for this interval
            else:
                self.source, self.method = self.counter_source, "counter"
        implied_power = power_w
        if delta is not None:  # the counter's: it replaces any estimate since its last read
            self.total_j = self._counted_j = self._counted_j + delta
            if power_w is None and counter_dt > 0:
                implied_power = delta / counter_dt
        elif power_w is not None and dt > 0:
            prev = self._last_power if self._last_power is not None else power_w
            self.total_j += (prev + power_w) / 2.0 * dt
            self.source, self.method = self.counter_source, "power"
            if counter_j is not None or self._last_counter is None:
                # A stale counter, or none at all: power is this interval's measure.
                self._counted_j = self.total_j
        self._last_t, self._last_power = now, power_w
        if counter_j is not None:
            self._last_counter, self._last_counter_t = counter_j, now
        if self.source is None:
            return EnergyReading(None, implied_power, None)
        self._shown_j = max(self._shown_j, self.total_j)
        return EnergyReading(self._shown_j, implied_power, self.source, self.method)

    def _counter_delta(
        self, prev: float, cur: float, dt: float, counter_range_j: float | None
    ) -> float:
        if cur >= prev:
            return cur - prev
        if counter_range_j:
            wrapped = counter_range_j - prev + cur
            if dt > 0 and wrapped / dt <= MAX_PLAUSIBLE_W:
                self.wraps += 1
                return wrapped
        self.resets += 1
        return cur
