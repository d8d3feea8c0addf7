from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptyst_top.snapshot.histogram import bucket_bounds, bucket_of, percentile


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_bucket_contains_its_value(v: int) -> None:
    low, high = bucket_bounds(bucket_of(v))
    assert low <= v < high
    # 16 sub-buckets per power of two: a bucket is at most 1/16 of its lower bound wide.
    assert high - low <= max(1, low // 16)


def test_buckets_are_ordered_and_contiguous() -> None:
    prev_high = 0
    for i in range(16 * 40):
        low, high = bucket_bounds(i)
        assert low == prev_high
        prev_high = high


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=50, max_value=5e9), min_size=200, max_size=2000),
    st.sampled_from([0.5, 0.95, 0.99]),
)
def test_percentile_within_5_percent(samples: list[float], q: float) -> None:
    values = [int(x) for x in samples]
    hist: dict[int, int] = {}
    for v in values:
        hist[bucket_of(v)] = hist.get(bucket_of(v), 0) + 1
    got = percentile(hist, q)
    assert got is not None
    # Compare against the nearest-rank truth with the same rank convention.
    ordered = sorted(values)
    lo = ordered[max(0, int(np.ceil(q * len(values))) - 1)]
    hi = ordered[min(len(values) - 1, int(np.ceil(q * len(values))))]
    assert lo * 0.95 <= got <= hi * 1.05


def test_empty_histogram() -> None:
    assert percentile({}, 0.5) is None
