"""The compact recording format (schema 2): a day of `record` that fits in a GiB.

A full snapshot line repeats every probe row whole, histogram included (~700 bytes a
row). A compact line says only what changed since the line before it, row by row, in
the same order:

- `{"same": N}`: the next N rows are as they were;
- `{"diff": {...}}`: the row at this place, with only the fields that changed (`unset`
  lists fields that went away; `raw~` the changed fields of `raw`), its histogram as
  the buckets that changed, flat (`hist_delta`: [gap, added, gap, added, ...], each
  bucket the one before plus its gap: small numbers, which compress well); `"from": J`
  when that row was at place J of the line before (rows added or removed above it
  moved it);
- any other object: a row written whole (a new one, or another row at this place).

A profile's stacks (what each interval added) are written as references: a stack's
thread and frames once, as `stacks_new` [[id, pid, tid, frames], ...], then each
interval's `stack_refs` [[id, {samples, off_ns, runnable_ns}], ...] in the order of
`stacks` (a C++ program's stacks are long names, and the same few recur every second).
Ids start again after each full line; past MAX_STACK_IDS the stacks are written whole.

Everything else is written whole (a few hundred bytes). Every KEYFRAME_EVERY
lines, and first, a line is written whole, as schema 1: a reader that lost a line (a
recording cut mid-line) starts again there, and the full lines alone read like any
recording. `replay` reads both; `export` writes full lines back for tools like jq.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from adaptyst_top.snapshot import SCHEMA_VERSION

COMPACT_SCHEMA = 2
KEYFRAME_EVERY = 600  # lines between full ones: 10 minutes at 1 s
_REF = ("group", "id", "key")
MAX_STACK_IDS = 100_000  # distinct stacks one run of compact lines refers to
_STACK_KEY = ("pid", "tid", "frames")


class CompactError(ValueError):
    """A compact line that cannot be read: the line it follows is missing."""


def _hist_delta(new: list[list[int]], old: list[list[int]]) -> list[int]:
    before = {b: c for b, c in old}
    changed = []
    for b, c in new:
        was = before.pop(b, 0)
        if c != was:
            changed.append((b, c - was))
    changed += [(b, -c) for b, c in before.items()]  # buckets gone (not seen in practice)
    out, last = [], 0
    for b, d in changed:
        out += [b - last, d]
        last = b
    return out


def _apply_hist(old: list[list[int]], delta: list[int]) -> list[list[int]]:
    counts = {b: c for b, c in old}
    bucket = 0
    for gap, d in zip(delta[::2], delta[1::2], strict=True):
        bucket += gap
        counts[bucket] = counts.get(bucket, 0) + d
    return [[b, c] for b, c in sorted(counts.items()) if c]


class CompactEncoder:
    """Full snapshot JSON objects in, what to write out (whole or compact)."""

    def __init__(self, keyframe_every: int = KEYFRAME_EVERY) -> None:
        self.keyframe_every = keyframe_every
        self._prev: list[dict[str, Any]] | None = None
        self._lines = 0
        self._stacks: dict[str, int] = {}  # a stack's thread and frames (as JSON): its id

    def encode(self, full: dict[str, Any]) -> dict[str, Any]:
        probes: list[dict[str, Any]] = full.get("probes", [])
        prev, self._prev = self._prev, probes
        self._lines += 1
        if prev is None or (self._lines - 1) % self.keyframe_every == 0:
            self._stacks = {}
            return full
        out = {**full, "probes": self._probes(probes, prev), "schema_version": COMPACT_SCHEMA}
        profile = full.get("profile")
        if isinstance(profile, dict) and isinstance(profile.get("stacks"), list):
            out["profile"] = self._profile(profile)
        return out

    def _profile(self, profile: dict[str, Any]) -> dict[str, Any]:
        """PROFILE with its stacks as references (whole past MAX_STACK_IDS)."""
        new: list[list[Any]] = []
        refs: list[list[Any]] = []
        for stack in profile["stacks"]:
            key = json.dumps([stack.get(k) for k in _STACK_KEY])
            sid = self._stacks.get(key)
            if sid is None:
                if len(self._stacks) >= MAX_STACK_IDS:
                    return profile
                sid = self._stacks[key] = len(self._stacks)
                new.append([sid, *(stack.get(k) for k in _STACK_KEY)])
            refs.append([sid, {k: v for k, v in stack.items() if k not in _STACK_KEY}])
        rest = {k: v for k, v in profile.items() if k != "stacks"}
        return {**rest, "stacks_new": new, "stack_refs": refs}

    def _probes(self, probes: list[dict[str, Any]], prev: list[dict[str, Any]]) -> list[Any]:
        rows: list[dict[str, Any]] = []
        same = 0
        where = {_ref(r): j for j, r in enumerate(prev)}
        for i, row in enumerate(probes):
            j = i if i < len(prev) and _ref(prev[i]) == _ref(row) else where.get(_ref(row))
            if j == i and prev[i] == row:
                same += 1
                continue
            if same:
                rows.append({"same": same})
                same = 0
            rows.append(self._row(row, None if j is None else prev[j]))
            if j is not None and j != i:
                rows[-1]["from"] = j
        if same:
            rows.append({"same": same})
        return rows

    @staticmethod
    def _row(row: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        if old is None:
            return row
        diff = {k: v for k, v in row.items() if k != "hist" and old.get(k) != v}
        if isinstance(diff.get("raw"), dict) and isinstance(old.get("raw"), dict):
            raw, was = diff.pop("raw"), old["raw"]
            diff["raw~"] = {k: v for k, v in raw.items() if was.get(k) != v}
            if any(k not in raw for k in was):
                diff["raw"] = raw  # a field of raw went away: whole
                del diff["raw~"]
        unset = [k for k in old if k not in row]
        if unset:
            diff["unset"] = unset
        if row.get("hist") != old.get("hist"):
            if isinstance(row.get("hist"), list) and isinstance(old.get("hist"), list):
                diff["hist_delta"] = _hist_delta(row["hist"], old["hist"])
            else:
                diff["hist"] = row.get("hist")
        return {"diff": diff}


class CompactDecoder:
    """What was written, line by line, back to full snapshot JSON objects."""

    def __init__(self) -> None:
        self._prev: list[dict[str, Any]] | None = None
        self._stacks: list[dict[str, Any]] = []  # by id: a stack's pid, tid and frames

    def decode(self, line: dict[str, Any]) -> dict[str, Any]:
        """The full object; CompactError for a compact line whose predecessor is missing
        (the reader then waits for the next full line)."""
        if line.get("schema_version") != COMPACT_SCHEMA:
            probes = line.get("probes")
            self._prev = probes if isinstance(probes, list) else None
            self._stacks = []
            return line
        prev, self._prev = self._prev, None
        if prev is None:
            raise CompactError("a compact line without the line before it")
        rows = list(self._rows(line.get("probes"), prev))
        out = {**line, "probes": rows, "schema_version": SCHEMA_VERSION}
        profile = line.get("profile")
        if isinstance(profile, dict) and "stack_refs" in profile:
            out["profile"] = self._profile(profile)
        self._prev = rows
        return out

    def _profile(self, profile: dict[str, Any]) -> dict[str, Any]:
        new, refs = profile.get("stacks_new"), profile.get("stack_refs")
        if not isinstance(new, list) or not isinstance(refs, list):
            raise CompactError("a profile's stacks that are not lists")
        for item in new:
            if not (isinstance(item, list) and len(item) == 4 and item[0] == len(self._stacks)):
                raise CompactError("a profile's new stack out of its order")
            if len(self._stacks) >= MAX_STACK_IDS:
                raise CompactError("more stacks than a run of compact lines holds")
            self._stacks.append(dict(zip(_STACK_KEY, item[1:], strict=True)))
        stacks = []
        for ref in refs:
            if not (isinstance(ref, list) and len(ref) == 2 and isinstance(ref[1], dict)):
                raise CompactError("a profile's stack reference that is not [id, counts]")
            sid = ref[0]
            if (
                not isinstance(sid, int)
                or isinstance(sid, bool)
                or not 0 <= sid < len(self._stacks)
            ):
                raise CompactError("a profile's stack reference to no stack")
            stacks.append({**self._stacks[sid], **ref[1]})
        rest = {k: v for k, v in profile.items() if k not in ("stacks_new", "stack_refs")}
        return {**rest, "stacks": stacks}

    @staticmethod
    def _rows(items: Any, prev: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        if not isinstance(items, list):
            raise CompactError("compact probes is not a list")
        # Each row of the line before is the base of one row at most, as the encoder
        # writes them: a line of {"diff": {}, "from": 0} rows repeating one row of
        # 80,000 histogram buckets made 15 KB decode to gigabytes.
        used: set[int] = set()
        i = 0
        for item in items:
            if not isinstance(item, dict):
                raise CompactError("a compact probe row is not an object")
            if "same" in item:
                n = item["same"]
                if not isinstance(n, int) or n < 1 or i + n > len(prev):
                    raise CompactError("a run of unchanged rows beyond the line before")
                run = range(i, i + n)
                if not used.isdisjoint(run):
                    raise CompactError("a row of the line before used twice")
                used.update(run)
                yield from prev[i : i + n]
                i += n
            elif "diff" in item:
                j = item.get("from", i)
                if not isinstance(j, int) or not 0 <= j < len(prev):
                    raise CompactError("a changed row with nothing before it")
                if not isinstance(item["diff"], dict):
                    raise CompactError("a changed row that is not an object")
                if j in used:
                    raise CompactError("a row of the line before used twice")
                used.add(j)
                yield _patched(prev[j], item["diff"])
                i += 1
            else:
                yield item
                i += 1


def _ref(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row's identity across lines (a list key made hashable)."""
    return tuple(str(row.get(k)) for k in _REF)


def _patched(old: dict[str, Any], diff: dict[str, Any]) -> dict[str, Any]:
    row = {k: v for k, v in old.items() if k not in diff.get("unset", ())}
    row.update((k, v) for k, v in diff.items() if k not in ("unset", "hist_delta", "raw~"))
    if "raw~" in diff:
        if not isinstance(old.get("raw"), dict) or not isinstance(diff["raw~"], dict):
            raise CompactError("a change of raw without raw before it")
        row["raw"] = {**old["raw"], **diff["raw~"]}
    if "hist_delta" in diff:
        delta, hist = diff["hist_delta"], old.get("hist")
        if not isinstance(delta, list) or not isinstance(hist, list):
            raise CompactError("a histogram delta without a histogram before it")
        try:
            row["hist"] = _apply_hist(hist, delta)
        except (TypeError, ValueError):
            raise CompactError("a histogram delta that is not [bucket, count] pairs") from None
    return row


def expand(lines: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Full objects from a recording's objects; a compact line that cannot be read
    (its predecessor lost) is left out, up to the next full line."""
    decoder = CompactDecoder()
    for line in lines:
        try:
            yield decoder.decode(line)
        except CompactError:
            continue


__all__ = ["COMPACT_SCHEMA", "CompactDecoder", "CompactEncoder", "CompactError", "expand"]
