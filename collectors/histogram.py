"""Log-linear latency histogram: 16 linear sub-buckets per power of two.

Values below 16 ns have a bucket each; above, a bucket spans 1/16 of its power of
two, so a percentile read at the bucket's interpolated position is within ~3% of the
truth (bcc's log2 buckets can be off by 2x). The kernel side computes the same index.
"""

from __future__ import annotations

from collections.abc import Mapping

SUB_BITS = 4
SUB = 1 << SUB_BITS  # linear sub-buckets per power of two
NBUCKETS = SUB * (64 - SUB_BITS + 1)


def bucket_of(value: int) -> int:
    if value < SUB:
        return max(value, 0)
    e = value.bit_length() - 1
    return SUB * (e - SUB_BITS + 1) + ((value >> (e - SUB_BITS)) & (SUB - 1))


def bucket_bounds(index: int) -> tuple[int, int]:
    """[low, high) of a bucket in ns."""
    if index < SUB:
        return index, index + 1
    e = index // SUB + SUB_BITS - 1
    sub = index % SUB
    width = 1 << (e - SUB_BITS)
    low = (SUB + sub) * width
    return low, low + width


def percentile(hist: Mapping[int, int], q: float) -> float | None:
    """The q-quantile (0..1), interpolated linearly inside its bucket."""
    total = sum(hist.values())
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for index in sorted(hist):
        count = hist[index]
        if count <= 0:
            continue
        if seen + count >= rank:
            low, high = bucket_bounds(index)
            frac = (rank - seen) / count
            return low + frac * (high - low)
        seen += count
    low, high = bucket_bounds(max(hist))
    return float(high)
