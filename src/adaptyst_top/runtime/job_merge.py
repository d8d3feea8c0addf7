"""A job's nodes' snapshots as one: each probe row summed over the nodes (its histogram
merged, its means weighed by count), each process's share named by its node, the
imbalance over every rank of the job; each node's devices and warnings under its name,
and a state per node. Pure: the nodes' latest snapshots in, one snapshot out."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from adaptyst_top.collectors.probes.engine.per_process import imbalance
from adaptyst_top.runtime.remote.continuity import combined
from adaptyst_top.snapshot import (
    DeviceReading,
    NodeState,
    ProbeEntry,
    ProbeKey,
    ProbeTarget,
    ProfileFunction,
    ProfilePart,
    Snapshot,
)
from adaptyst_top.snapshot.profile import ProfileStack

RowIdentity = tuple[str, str, ProbeKey]  # spec, name, key: one row on every node


def row_identity(p: ProbeEntry) -> RowIdentity:
    return (p.spec, p.name, p.key)


def merge_nodes(
    t: float,
    host: str,
    job: str,
    snaps: Mapping[str, Snapshot],
    states: Sequence[NodeState],
    ranks: Mapping[str, Mapping[int, int | None]] | None = None,
    fresh: Collection[str] | None = None,
    relayed: Collection[str] = (),
) -> Snapshot:
    """One snapshot at T (the run's clock) of SNAPS (node -> its latest), seen from HOST;
    RANKS: each node's processes' ranks, as each node told them; FRESH: the nodes whose
    latest came since the last merge (None: all), whose profile stacks (an interval's)
    are this one's; RELAYED: those of SNAPS that are a relay's merge of its group's
    (their shares, devices, warnings and stacks already named by node, kept so)."""
    rows: dict[RowIdentity, ProbeEntry] = {}
    devices: list[DeviceReading] = []
    warnings: list[str] = []
    pids: list[int] = []
    for node, snap in sorted(snaps.items()):
        told = {} if node in relayed else (ranks or {}).get(node, {})
        for p in snap.probes:
            named = replace(
                p,
                parts=tuple(
                    replace(
                        q,
                        node=q.node if node in relayed else node,
                        rank=q.rank if q.rank is not None else told.get(q.pid),
                    )
                    for q in p.parts
                ),
            )
            key = row_identity(p)
            before = rows.get(key)
            if before is None:
                rows[key] = named
            else:
                rows[key] = replace(
                    combined(before, named),
                    rate_hz=round(before.rate_hz + named.rate_hz, 3),
                    state=before.state if before.state == "attached" else named.state,
                    parts=before.parts + named.parts,
                    group=before.group,
                    id=before.id,
                )
        if node in relayed:
            devices += snap.devices
            warnings += snap.warnings
        else:
            devices += [_named_device(d, node) for d in snap.devices]
            warnings += [f"{node}: {w}" for w in snap.warnings]
        if snap.target is not None:
            pids += snap.target.pids
    probes = []
    for p in rows.values():
        parts = tuple(sorted(p.parts, key=lambda q: (-q.weight, q.node or "", q.pid)))
        ratio, top = imbalance(parts)
        probes.append(replace(p, parts=parts, imbalance=ratio, imbalance_pid=top))
    answered = [s for s in snaps.values() if s.target is not None]
    return Snapshot(
        t=t,
        host=host,
        probes=tuple(probes),
        devices=tuple(devices),
        target=ProbeTarget(f"job {job} on {len(states)} nodes", tuple(sorted(pids))),
        target_ended=bool(answered) and all(s.target_ended for s in answered),
        overhead=max(
            (s.overhead for s in snaps.values() if s.overhead and s.overhead.share is not None),
            key=lambda o: o.share or 0.0,
            default=next((s.overhead for s in snaps.values() if s.overhead), None),
        ),
        profile=_profiles(
            [(n, s.profile) for n, s in sorted(snaps.items()) if s.profile is not None],
            ranks or {},
            snaps.keys() if fresh is None else fresh,
            relayed,
        ),
        warnings=tuple(warnings),
        nodes=tuple(states),
    )


def _profiles(
    by_node: Sequence[tuple[str, ProfilePart]],
    ranks: Mapping[str, Mapping[int, int | None]],
    fresh: Collection[str],
    relayed: Collection[str] = (),
) -> ProfilePart | None:
    """The nodes' profiles as one: each function's samples and off-CPU time summed; the
    stacks of the nodes' fresh intervals, each under its node and rank (`node2;rank 3;
    main;...`, `node2;pid 42;...` for a process that names none: export's folded stacks
    keep them)."""
    if not by_node:
        return None
    parts = [p for _, p in by_node]
    stacks: list[ProfileStack] = []
    for node, part in by_node:
        if node not in fresh:
            continue  # its interval's stacks were in an earlier merge
        if node in relayed:
            stacks += part.stacks  # each under its node and rank already
            continue
        told = ranks.get(node, {})
        for s in part.stacks:
            rank = told.get(s.pid)
            head = (node, f"pid {s.pid}" if rank is None else f"rank {rank}")
            stacks.append(replace(s, frames=head + tuple(s.frames)))
    functions: dict[tuple[str, str | None], ProfileFunction] = {}
    for part in parts:
        for f in part.functions:
            key = (f.name, f.module)
            had = functions.get(key)
            functions[key] = (
                f
                if had is None
                else replace(
                    had,
                    self_samples=had.self_samples + f.self_samples,
                    total=had.total + f.total,
                    off_ns=had.off_ns + f.off_ns,
                )
            )
    hottest = sorted(functions.values(), key=lambda f: (-f.total, -f.off_ns))
    first = parts[0]
    return replace(
        first,
        samples=sum(p.samples for p in parts),
        functions=tuple(hottest[: max(len(p.functions) for p in parts)]),
        stacks=tuple(stacks),
    )


def _named_device(d: DeviceReading, node: str) -> DeviceReading:
    """D under its node's name; the device an OpenCL view runs on (maps_to) too."""
    extra = dict(d.extra)
    if isinstance(extra.get("maps_to"), str):
        extra["maps_to"] = f"{node}/{extra['maps_to']}"
    return replace(d, id=f"{node}/{d.id}", name=f"{node}: {d.name}", extra=extra)
