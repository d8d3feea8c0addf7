"""Today's codec against msgspec on the same probe rows, with the same checks.

    .venv/bin/python -m bench.bench_codec_msgspec [--rows N] [--repeat N] [--json]

#52 asks whether msgspec, which declares a type once and decodes and checks it in C,
reads a snapshot's rows at least 3x faster than snapshot/codec.py. The rows of a
200-row snapshot (bench_snapshot_codec's line: real rows cloned) are read three ways:

- `json.loads` alone: the parse any reader pays (the floor);
- today: `json.loads`, then `ProbeEntry.from_json` per row (codec.py's checks);
- msgspec: `msgspec.json.decode` into a Struct declared like ProbeEntry's JSON (the
  contract's names, `class` included; kinds and states as Literals; integers whole;
  numbers finite, since strict JSON has no NaN; [bucket, count] pairs), then each
  text field made inert as codec.py makes it (`snapshot.inert`).

Rows are the bulk of a snapshot (devices and sources are a few entries): the ratio on
them is the ratio a migration could win. msgspec is only imported here.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Literal

import msgspec

from adaptyst_top.snapshot import ProbeEntry
from adaptyst_top.snapshot.inert import inert
from bench import common
from bench.bench_snapshot_codec import best_us, line_of

Finite = float  # strict JSON: NaN and Infinity are refused by the decoder


class Raw(msgspec.Struct):
    """The six latency figures, in ns."""

    mean_ns: Finite | None = None
    p50_ns: Finite | None = None
    p95_ns: Finite | None = None
    p99_ns: Finite | None = None
    min_ns: Finite | None = None
    max_ns: Finite | None = None


class Row(Raw, kw_only=True, rename={"cost_class": "class"}):
    """A probe row's JSON; its net latency figures (Raw's six) sit in the row itself."""

    spec: str
    name: str
    id: int | None = None
    kind: Literal["uprobe", "usdt"] | None = None
    key: str | int | None = None
    state: Literal["pending", "attached", "detached", "ended", "error"] = "pending"
    target: str | None = None
    cost_class: str | None = None
    count: int = 0
    rate_hz: Finite = 0.0
    overhead_ns_per_hit: Finite | None = None
    overhead_source: str | None = None
    bpf_ns_per_hit: Finite | None = None
    raw: Raw | None = None
    hist: list[tuple[int, int]] | None = None
    cpu_ns: int | None = None
    energy_j: Finite | None = None
    energy_method: Literal["counter", "power"] | None = None
    error: str | None = None
    group: int | str | None = None


_DECODER = msgspec.json.Decoder(list[Row])


def msgspec_rows(line: bytes) -> list[Row]:
    rows = _DECODER.decode(line)
    for r in rows:  # as codec.read_text: shown, never acted on
        r.spec, r.name = inert(r.spec), inert(r.name)
        if r.target is not None:
            r.target = inert(r.target)
        if r.cost_class is not None:
            r.cost_class = inert(r.cost_class)
        if type(r.key) is str:
            r.key = inert(r.key)
        if r.error is not None:
            r.error = inert(r.error)
        if r.group is None:
            r.group = r.spec  # schema 0 had no group: the spec text was its identity
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    common.header(a.json)
    probes = json.loads(line_of(a.rows))["probes"]
    text = json.dumps(probes)
    data = text.encode()
    ours = [ProbeEntry.from_json(p) for p in json.loads(text)]
    theirs = msgspec_rows(data)
    assert len(ours) == len(theirs) == a.rows
    assert all(
        o.count == t.count and o.p99_ns == t.p99_ns for o, t in zip(ours, theirs, strict=True)
    )
    floor = best_us(lambda: json.loads(text), a.repeat)
    today = best_us(lambda: [ProbeEntry.from_json(p) for p in json.loads(text)], a.repeat)
    other = best_us(lambda: msgspec_rows(data), a.repeat)
    res: dict[str, Any] = {
        "rows": a.rows,
        "json_loads_us": round(floor, 1),
        "codec_us": round(today, 1),
        "msgspec_us": round(other, 1),
        "codec_over_msgspec": round(today / other, 2),
        "codec_over_json_loads": round(today / floor, 2),
        "msgspec_over_json_loads": round(other / floor, 2),
    }
    common.footer(res, a.json, width=24, spec="")


if __name__ == "__main__":
    main()
