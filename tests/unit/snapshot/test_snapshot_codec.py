"""The one codec: each part's JSON comes from its declaration, read back checked."""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from adaptyst_top.snapshot import (
    DeviceKind,
    DeviceReading,
    EnergySource,
    Latency,
    Snapshot,
    SnapshotError,
)
from adaptyst_top.snapshot.codec import JsonPart, decode, encode, json_field
from tests.support.paths import REPO

SNAPSHOT_PACKAGE = REPO / "src" / "adaptyst_top" / "snapshot"


@dataclass(frozen=True, slots=True)
class Inner(JsonPart):
    n: int
    x: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outer(JsonPart):
    name: str
    kind: str = field(metadata=json_field(name="class"))
    size: float
    inner: Inner = field(default=Inner(0), metadata=json_field(flatten=True))
    parts: tuple[Inner, ...] = ()
    pair: tuple[int, int]
    extra: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    note: str | None = field(default=None, metadata=json_field(omit="none"))
    flag: bool = field(default=False, metadata=json_field(omit="empty"))
    positive: tuple[int, ...] = field(
        default=(), metadata=json_field(check=(lambda v: all(x > 0 for x in v), "positive"))
    )
    alias: str = field(metadata=json_field(missing_from="name"))
    version: int = field(default=2, metadata=json_field(missing=0))


def test_written_in_declaration_order_under_the_contracts_names() -> None:
    o = Outer(name="a", kind="k", size=1.5, inner=Inner(3, 0.5), pair=(1, 2), alias="b")
    assert list(encode(o)) == [
        "name", "class", "size", "n", "x", "parts", "pair", "extra", "positive", "alias",
        "version",
    ]  # fmt: skip
    assert encode(o)["pair"] == [1, 2] and "note" not in encode(o) and "flag" not in encode(o)
    assert encode(Outer(**{**_kw(), "note": "", "flag": True}))["flag"] is True
    assert decode(Outer, encode(o)) == o


def _kw() -> dict[str, Any]:
    return {"name": "a", "kind": "k", "size": 1, "pair": (1, 2), "alias": "b"}


def test_an_old_line_without_later_fields_reads_as_their_zero_or_default() -> None:
    o = decode(Outer, {"name": "a"})
    assert (o.kind, o.size, o.pair, o.parts, o.extra, o.note, o.flag) == (
        "", 0.0, (0, 0), (), {}, None, False
    )  # fmt: skip
    assert o.alias == "a" and o.version == 0 and o.inner == Inner(0, None)


def test_an_integer_stays_an_integer_and_a_whole_float_is_an_integer() -> None:
    o = decode(Outer, {**_kw(), "size": 3, "n": 4.0, "pair": [1.0, 2]})
    assert type(o.size) is int and o.inner.n == 4 and type(o.inner.n) is int
    assert o.pair == (1, 2)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"size": float("inf")}, "Outer: size is not a finite number"),
        ({"size": True}, "Outer: size is not a finite number"),
        ({"n": 1.5}, "Outer: n is not an integer"),
        ({"parts": [{"n": 1}, {"n": "2"}]}, "Outer: parts[1].n is not an integer"),
        ({"parts": [{"n": 1}, 7]}, "Outer: parts[1] is not a JSON object"),
        ({"pair": [1]}, "Outer: pair is not a list of 2 integers"),
        ({"extra": {"cpu": 1}}, "Outer: extra.cpu is not a JSON object"),
        ({"positive": [3, 0]}, "Outer: positive is not positive"),
        ({"name": ["a"]}, "Outer: name is not a string"),
    ],
)
def test_what_is_not_the_declared_type_is_refused_saying_where(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(SnapshotError) as e:
        decode(Outer, {**_kw(), "pair": [1, 2], **change})
    assert str(e.value) == message


def test_a_required_field_and_a_non_object() -> None:
    with pytest.raises(SnapshotError, match=r"^Snapshot: t is missing$"):
        Snapshot.from_json({"host": "h"})
    with pytest.raises(SnapshotError, match=r"^Snapshot is not a JSON object$"):
        Snapshot.from_json([])


def test_text_is_inert_in_fields_keys_and_free_form_values() -> None:
    o = decode(
        Outer,
        {**_kw(), "pair": [1, 2], "name": "x\x1b[2J", "extra": {"g\x07": {"n": ["\x9b"]}}},
    )
    assert o.name == "x\\x1b[2J" and o.alias == "b"
    assert o.extra == {"g\\x07": {"n": ["\\x9b"]}}
    d = DeviceReading.from_json({"id": "gpu:0", "name": "H200", "extra": {"procs": ["\x1b]0;"]}})
    assert d.kind == "cpu" and d.extra == {"procs": ["\\x1b]0;"]}


def test_a_flattened_part_reads_its_fields_from_the_parent() -> None:
    assert Latency.from_json({"p99_ns": 5, "other": 1}) == Latency(p99_ns=5)


def test_no_part_of_the_snapshot_writes_or_reads_its_json_by_hand() -> None:
    for path in SNAPSHOT_PACKAGE.glob("*.py"):
        if path.name == "codec.py":
            continue
        hand = re.findall(r"def (to_json|from_json)|json\.(dumps|loads)", path.read_text())
        assert not hand, (path.name, hand)


def test_an_integer_past_any_float_is_no_number() -> None:
    """A recording's `util` of 4,000 digits was read, and the row's float() then raised
    OverflowError in the replay's screen."""
    from adaptyst_top.snapshot.value_readers import Bad, read_number

    with pytest.raises(Bad):
        read_number(10**4000)
    assert read_number(10**300) == 10**300 and read_number(-5) == -5


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ({"devices": [{"id": "npu:0", "kind": "npu", "name": "x"}]}, "devices[0].kind"),
        ({"devices": [{"id": "c", "name": "x", "energy_source": "psu"}]}, "energy_source"),
        ({"devices": [{"id": "c", "name": "x", "energy_method": 1}]}, "energy_method"),
        ({"device_sources": [{"name": "rapl", "state": "fine"}]}, "device_sources[0].state"),
        ({"probes": [{"spec": "s", "name": "f", "kind": "kprobe"}]}, "probes[0].kind"),
        ({"probes": [{"spec": "s", "name": "f", "kind": "usdt", "state": "on"}]}, "state"),
    ],
)
def test_a_word_outside_its_vocabulary_is_refused_naming_the_words(
    part: dict[str, Any], message: str
) -> None:
    """A Literal field reads only its own words: "kind": "npu" was read as any text."""
    with pytest.raises(SnapshotError) as e:
        Snapshot.from_json({"t": 1.0, "host": "h", **part})
    assert message in str(e.value) and "is not one of" in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_every_word_of_a_vocabulary_reads_back() -> None:
    for kind in typing.get_args(DeviceKind):
        for source in typing.get_args(EnergySource):
            d = DeviceReading(id="d", kind=kind, name="n", energy_source=source)
            assert DeviceReading.from_json(d.to_json()) == d
