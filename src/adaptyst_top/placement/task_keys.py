"""The key a task run is filed under: `task|device|log2 size|feature bucket`, the same
in Python, C, C++ and Fortran. Plain functions: reading keys (the TUI, the advisor) does
not load the task API's C extension."""

from __future__ import annotations

import math

from adaptyst_top.snapshot.task_key import MAX_FEATURE_BUCKET as MAX_FEATURE_BUCKET
from adaptyst_top.snapshot.task_key import MAX_SIZE_BUCKET as MAX_SIZE_BUCKET
from adaptyst_top.snapshot.task_key import parse_key as parse_key


def size_bucket(size: int) -> int:
    """log2 of the input size: inputs within a factor of two share statistics."""
    return max(0, int(size).bit_length() - 1)


def feature_bucket(feature: float | None) -> int:
    """A feature in (0, 1] (e.g. density) in half-decades: 0 = none, 1 = 1..0.3, ..."""
    if feature is None or feature <= 0:
        return 0
    return 1 + min(14, int(-2 * math.log10(min(1.0, feature))))


def task_key(name: str, device: str, size: int, feature: float | None = None) -> str:
    key = f"{name}|{device}|{size_bucket(size)}|{feature_bucket(feature)}"
    return key[:31]  # the probe's key holds 31 bytes


# The Python task API's USDT sites live in its C extension (placement/_sdt.c): the file a
# task probe of a Python application names is that, not the application.
PYTHON_SITES_PREFIX = "_sdt."
