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
    return percentiles(hist, (q,))[0]


def percentiles(hist: Mapping[int, int], qs: tuple[float, ...]) -> list[float | None]:
    """Several quantiles (ascending qs) in one pass over the sorted buckets."""
    total = sum(hist.values())
    if total <= 0:
        return [None] * len(qs)
    out: list[float | None] = []
    ranks = [q * total for q in qs]
    seen = 0
    i = 0
    for index in sorted(hist):
        count = hist[index]
        if count <= 0:
            continue
        while i < len(ranks) and seen + count >= ranks[i]:
            low, high = bucket_bounds(index)
            out.append(low + (ranks[i] - seen) / count * (high - low))
            i += 1
        seen += count
        if i == len(ranks):
            return out
    last = float(bucket_bounds(max(hist))[1])
    return out + [last] * (len(ranks) - i)
