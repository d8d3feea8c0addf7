"""A task row's key as the snapshot carries it: `task|device|log2 size|feature bucket`
(placement/task_keys.py writes it; the advisor, the GPU energy split, the exporter and
the TUI read it here)."""

from __future__ import annotations

MAX_SIZE_BUCKET = 63  # sizes are 64-bit counts
MAX_FEATURE_BUCKET = 15  # feature_bucket's


def parse_key(key: str) -> tuple[str, str, int, int] | None:
    """(task, device, size bucket, feature bucket) of a key, or None unless each part is
    what task_key writes: a key is what any application sends."""
    parts = key.split("|")
    if len(parts) != 4 or not all(p.isascii() and p.isdigit() for p in parts[2:]):
        return None
    sb, fb = int(parts[2]), int(parts[3])
    if len(parts[2]) > 2 or len(parts[3]) > 2 or sb > MAX_SIZE_BUCKET or fb > MAX_FEATURE_BUCKET:
        return None
    return parts[0], parts[1], sb, fb


def task_device(key: object) -> str | None:
    """The device part of a task key (before any ":N"), or None: not a task key."""
    parsed = parse_key(key) if isinstance(key, str) else None
    return None if parsed is None else parsed[1].split(":")[0]
