"""Devices whose calls of a stream keep failing (a driver broken on that node): counted,
and left out for a while, as a device no worker offers; then looked at again."""

from __future__ import annotations

FAILS_TO_DROP = 3  # failures in a row before a device is left out (never the CPU)
DROPPED_FOR = 200  # calls of the stream before a left-out device is looked at again


class Failing:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # device -> its calls that failed, in all
        self._in_a_row: dict[str, tuple[int, int]] = {}  # device -> (in a row, at call)

    def ran(self, device: str) -> None:
        self._in_a_row.pop(device, None)

    def failed(self, device: str, calls: int) -> None:
        """A call on DEVICE raised; CALLS: the stream's calls back so far."""
        self.counts[device] = self.counts.get(device, 0) + 1
        run = self._in_a_row.get(device, (0, 0))[0] + 1
        self._in_a_row[device] = (run, calls)

    def dropped(self, calls: int) -> set[str]:
        """Devices whose last FAILS_TO_DROP calls failed, within the last DROPPED_FOR of
        the stream's CALLS."""
        return {
            d
            for d, (run, at) in self._in_a_row.items()
            if run >= FAILS_TO_DROP and calls - at < DROPPED_FOR and d != "cpu"
        }
