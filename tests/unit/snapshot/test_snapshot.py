"""The snapshot contract in code: typed entries, JSON as before the types existed, old
recordings read back, one identity per probe row."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from typing import Any

import pytest

from adaptyst_top.runtime.sources import parse_snapshot_line
from adaptyst_top.snapshot import (
    SCHEMA_VERSION,
    AdviceEntry,
    AdvisorState,
    CommandState,
    DeviceReading,
    Latency,
    Move,
    Overhead,
    ProbeEntry,
    ProbeRef,
    Snapshot,
    SnapshotError,
    SourceState,
    TaskEntry,
    reusing,
)
from tests.support.paths import DATA, REPO

RECORDING = DATA / "recording.jsonl"  # made before schema 1
WRITTEN = DATA / "written-schema1.jsonl"


def contained(old: Any, new: Any, where: str = "") -> None:
    """Every field of OLD is in NEW with the same value and JSON type (fields may be added)."""
    if isinstance(old, dict):
        assert isinstance(new, dict), where
        for k, v in old.items():
            assert k in new, f"{where}.{k} dropped"
            contained(v, new[k], f"{where}.{k}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), where
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            contained(a, b, f"{where}[{i}]")
    else:
        assert old == new and type(old) is type(new), (where, old, new)


def test_a_recording_made_before_the_types_reads_back_field_for_field() -> None:
    lines = RECORDING.read_bytes().splitlines()
    assert len(lines) == 8
    for line in lines:
        old = json.loads(line)
        snap = Snapshot.from_json(old)
        assert snap.schema_version == 0  # no version written then
        assert {p.group for p in snap.probes} == {p["spec"] for p in old["probes"]}
        new = snap.to_json()
        contained(old, new)
        assert new["schema_version"] == 0  # what it holds is still of that version
        assert Snapshot.from_json(json.loads(json.dumps(new))) == snap


def full_snapshot() -> Snapshot:
    probe = ProbeEntry(
        group=3,
        id=7,
        spec="usdt:./app:adaptyst:task_begin..task_end@arg1",
        name="adaptyst:task_begin..task_end",
        kind="usdt",
        key="gemm|cpu|10|0",
        state="attached",
        target="/usr/lib/app",
        cost_class="usdt-pair",
        count=12,
        rate_hz=4.0,
        overhead_ns_per_hit=1700.0,
        overhead_source="calibrated",
        bpf_ns_per_hit=410.5,
        latency=Latency(1e6, 9e5, 1.2e6, 1.3e6, 8e5, 1.4e6),
        raw=Latency(1.001e6, 9.01e5, 1.201e6, 1.301e6, 8.01e5, 1.401e6),
        hist=((280, 10), (290, 2)),
    )
    return Snapshot(
        t=3.5,
        host="node1",
        probes=(
            probe,
            ProbeEntry(
                group=4,
                id=None,
                spec="uprobe:c:nope",
                name="nope",
                kind="uprobe",
                state="error",
                error="no match",
            ),
        ),
        devices=(DeviceReading("cpu", "cpu", "EPYC", util=0.5, mem_total_bytes=1 << 30),),
        tasks=(
            TaskEntry(
                "gemm",
                "cpu",
                12,
                (10, 0),
                {"cpu": {"time_s": 0.001, "energy_j": None, "samples": 12}},
                (("cpu", 0.001, None),),
            ),
        ),
        advice=(AdviceEntry("gemm", "cpu", "opencl:0", 0.4, None, 0.8, "faster"),),
        device_sources=(SourceState("nvml", "missing", "no NVIDIA GPU"),),
        overhead=Overhead(0.004, 0.02, "calibrated"),
        advisor=AdvisorState(
            "running", "auto", "time", "1 tasks", (Move("gemm", "cpu", "opencl:0", True, 1),)
        ),
        command=CommandState(
            ("./app", "-n", "3"), 4242, None, "/run/user/0/adaptyst-top/command.log"
        ),
        warnings=("app exited with status 0",),
        target_ended=True,
        final=True,
    )


def test_every_part_survives_json() -> None:
    snap = full_snapshot()
    text = json.dumps(snap.to_json())
    back = Snapshot.from_json(json.loads(text))
    assert back == snap and back.schema_version == SCHEMA_VERSION
    d = json.loads(text)
    # The contract's names, where Python could not use them.
    assert d["probes"][0]["class"] == "usdt-pair" and d["advisor"]["moves"][0]["from"] == "cpu"
    assert d["probes"][0]["p99_ns"] == 1.3e6 and d["probes"][0]["raw"]["p99_ns"] == 1.301e6
    assert d["probes"][0]["hist"] == [[280, 10], [290, 2]]
    assert "raw" not in d["probes"][1] and d["probes"][1]["error"] == "no match"
    assert d["command"]["argv"] == ["./app", "-n", "3"] and d["final"] is True


def test_parts_are_frozen() -> None:
    snap = full_snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.t = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.probes[0].count = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "part"),
    [
        (lambda d: d.update(t=math.inf), "t"),
        (lambda d: d.update(t="soon"), "t"),
        (lambda d: d.pop("t"), "t is missing"),
        (lambda d: d.update(probes={}), "probes"),
        (lambda d: d["probes"][0].update(count=1.5), "count"),
        (lambda d: d["probes"][0].update(count=True), "count"),
        (lambda d: d["probes"][0].update(p99_ns=math.nan), "p99_ns"),
        (lambda d: d["probes"][0].update(key=[1]), "key"),
        (lambda d: d["probes"][0].update(hist=[[1]]), "hist"),
        (lambda d: d["probes"][0]["raw"].update(max_ns="x"), "max_ns"),
        (lambda d: d["devices"][0].update(util="high"), "util"),
        (lambda d: d.update(overhead=[]), "overhead"),
        (lambda d: d.update(warnings=[1]), "warnings"),
        (lambda d: d["command"].update(argv="app"), "argv"),
        (lambda d: d["tasks"][0].update(input_bucket=[1]), "input_bucket"),
        (lambda d: d["advisor"].update(moves=[3]), "move"),
    ],
)
def test_what_is_not_a_snapshot_is_refused_saying_where(change: Any, part: str) -> None:
    d = full_snapshot().to_json()
    change(d)
    with pytest.raises(SnapshotError, match=part):
        Snapshot.from_json(d)
    assert parse_snapshot_line(json.dumps(d).encode()) is None


def test_a_newer_schema_is_read_for_what_this_version_knows() -> None:
    d = full_snapshot().to_json()
    d["schema_version"] = SCHEMA_VERSION + 1
    d["probes"][0]["new_field"] = {"x": 1}
    snap = parse_snapshot_line(json.dumps(d).encode())
    assert snap is not None and snap.schema_version == SCHEMA_VERSION + 1
    assert snap.probes[0].count == 12


def test_one_identity_per_row_and_key() -> None:
    refs = {
        ProbeRef(1, 2, None),
        ProbeRef(1, 2, "a"),
        ProbeRef(1, 2, 1),
        ProbeRef(1, 2, "1"),  # a string key is not the integer of the same digits
        ProbeRef(1, None, None),
        ProbeRef(2, 2, None),
        ProbeRef("uprobe:c:*", 2, None),
    }
    assert len({r.text for r in refs}) == len(refs)
    p = full_snapshot().probes[0]
    assert p.ref == ProbeRef(3, 7, "gemm|cpu|10|0")


def test_the_documented_example_is_a_snapshot() -> None:
    doc = (REPO / "docs" / "data-flow.md").read_text()
    example = doc.split("```json\n", 1)[1].split("```", 1)[0]
    snap = Snapshot.from_json(json.loads(example))
    assert snap.schema_version == SCHEMA_VERSION and snap.probes[0].ref == ProbeRef(0, 0, None)
    contained(json.loads(example), snap.to_json())


def test_what_this_version_wrote_is_written_again_byte_for_byte() -> None:
    """written-schema1.jsonl was written by the hand-made encoder this codec replaced:
    this snapshot, one without its optional parts, and two recorded lines read back."""
    lines = WRITTEN.read_text().splitlines()
    assert json.dumps(full_snapshot().to_json()) == lines[0]
    for line in lines:
        assert json.dumps(Snapshot.from_json(json.loads(line)).to_json()) == line


# kind and state are words of a vocabulary: anything else is refused (test_snapshot_codec).
@pytest.mark.parametrize("where", ["spec", "name", "key", "target", "class"])
def test_control_characters_are_made_inert_in_whichever_text_field(where: str) -> None:
    row = full_snapshot().to_json()["probes"][0]
    row[where] = "a\x1b]0;pwned\x07b"
    probe = ProbeEntry.from_json(row)
    text = json.dumps(probe.to_json())
    assert "\x1b" not in json.loads(text)[where] and "\\x1b" in json.loads(text)[where]
    assert probe.count == 12 and probe.hist == ((280, 10), (290, 2))


def test_reusing_takes_equal_rows_again_and_reads_the_rest() -> None:
    snap = full_snapshot()
    d = json.loads(json.dumps(snap.to_json()))
    changed = json.loads(json.dumps(d))
    changed["probes"][0]["count"] = 13
    with reusing():
        first = Snapshot.from_json(d)
        again = Snapshot.from_json(json.loads(json.dumps(d)))
        second = Snapshot.from_json(changed)
    assert first == snap and again == snap
    assert again.probes[1] is first.probes[1]  # equal JSON at its place: taken again
    assert second.probes[0].count == 13 and second.probes[1] is first.probes[1]
    # What is not a snapshot is refused whatever was read before: a changed object, and
    # true after 12 (equal for Python's ==).
    changed["probes"][1]["count"] = "many"
    with reusing(), pytest.raises(SnapshotError, match="count"):
        Snapshot.from_json(changed)
    flag = json.loads(json.dumps(d))
    flag["probes"][0]["count"] = True
    with reusing():
        Snapshot.from_json(json.loads(json.dumps(d)))
        with pytest.raises(SnapshotError, match="count"):
            Snapshot.from_json(flag)
    # Outside it nothing is taken again: a caller may change what it handed over.
    assert Snapshot.from_json(d).probes[1] is not first.probes[1]


def test_reusing_writes_what_a_fresh_write_would() -> None:
    snap = full_snapshot()
    busier = dataclasses.replace(
        snap, probes=(dataclasses.replace(snap.probes[0], count=99), snap.probes[1])
    )
    with reusing():
        written = [json.dumps(s.to_json()) for s in (snap, snap, busier, snap)]
    assert written == [json.dumps(s.to_json()) for s in (snap, snap, busier, snap)]


def test_reusing_keeps_each_thread_apart() -> None:
    snaps = [full_snapshot()]
    snaps.append(
        dataclasses.replace(
            snaps[0],
            probes=tuple(dataclasses.replace(p, count=p.count + 5) for p in snaps[0].probes),
        )
    )
    lines = [json.dumps(s.to_json()) for s in snaps]
    wrong: list[str] = []

    def client(k: int) -> None:
        with reusing():
            for _ in range(300):
                if Snapshot.from_json(json.loads(lines[k])) != snaps[k]:
                    wrong.append(f"read {k}")
                if json.dumps(snaps[k].to_json()) != lines[k]:
                    wrong.append(f"wrote {k}")

    threads = [threading.Thread(target=client, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    # Each thread takes again only what it read itself.
    parts: list[Snapshot] = []

    def read_twice() -> None:
        with reusing():
            parts.extend(Snapshot.from_json(json.loads(lines[0])) for _ in range(2))

    for _ in range(2):
        t = threading.Thread(target=read_twice)
        t.start()
        t.join()
    assert parts[1].probes[0] is parts[0].probes[0] and parts[3].probes[0] is parts[2].probes[0]
    assert parts[2].probes[0] is not parts[1].probes[0]
