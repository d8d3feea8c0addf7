"""What `list` shows: the function symbols and USDT probes of a binary or of a process's
mapped objects, with each function's first instruction and whether a probe would be
refused there. Shared by the CLI and the agent (which lists for a user what they may)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from adaptyst_top.collectors.probes.elf.demangle import matches, name_of
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, ElfReader, FunctionSymbol, read_elf
from adaptyst_top.collectors.probes.elf.ifunc import IfuncError
from adaptyst_top.collectors.probes.engine.attach_plan import plan_function
from adaptyst_top.collectors.probes.safety.entry_safety import (
    EntryPolicy,
    cached_policy,
    policy_for_this_boot,
)
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.targets import check_pid, mapped_files, mount_root, resolve_target


@dataclass(frozen=True)
class Candidate:
    """One line of the add-probe picker: the spec it adds (the raw symbol: it always
    parses), what it shows (the name as the source spells it) and why a probe there
    would be refused (None: it may be probed, or nothing is known yet)."""

    spec: str
    label: str
    refused: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: object) -> Candidate | None:
        """A candidate from the agent's answer; None for anything of another shape."""
        if not isinstance(d, dict):
            return None
        spec, label, refused = d.get("spec"), d.get("label"), d.get("refused")
        if not isinstance(spec, str) or not isinstance(label, str):
            return None
        return cls(spec, inert(label), inert(refused) if isinstance(refused, str) else None)


def candidates(
    files: list[str],
    pid: int | None,
    policy: EntryPolicy | None,
    sources: dict[str, str] | None = None,
    read: ElfReader = read_elf,
) -> list[Candidate]:
    """Every candidate of FILES at once (iter_candidates)."""
    return list(iter_candidates(files, pid, policy, sources, read))


def iter_candidates(
    files: list[str],
    pid: int | None,
    policy: EntryPolicy | None,
    sources: dict[str, str] | None = None,
    read: ElfReader = read_elf,
) -> Iterator[Candidate]:
    """Every function of FILES (in their order: the executable first, then the libraries
    it maps) and every USDT probe in them, with the refused ones marked, as each is
    read: a picker shows the first while a library of 200,000 symbols is still being
    read. A spec is given once (an unstripped library has local functions that share a
    name, 52 of OpenBLAS' `add_y`: one spec probes them all). SOURCES: where each file
    is read (the agent's descriptors opened as its user; a file without one is left
    out), when not at its path; READ parses each (the agent's: in its user's worker)."""
    given: set[str] = set()
    for path in files:
        source = path if sources is None else sources.get(path)
        if source is None:
            continue
        try:
            info = read(source)
        except (OSError, ValueError):
            continue
        for f in info.functions:
            spec = f"uprobe:{path}:{f.name}"
            if spec in given:
                continue
            shown = name_of(f.name, f.source)
            if shown.cold:
                continue  # the split-off unlikely branch of a function, not a function
            given.add(spec)
            refused = (
                _function(path, info, f, policy, pid, source).get("refused") if policy else None
            )
            yield Candidate(spec, inert(f"{path}:{shown.display}"), refused)
        for u in info.usdt:
            spec = f"usdt:{path}:{u.provider}:{u.name}"
            if spec not in given:
                given.add(spec)
                yield Candidate(spec, inert(spec))  # a provider's names are any bytes


def entry_policy() -> EntryPolicy | None:
    """The boot's entry-check verdicts: cached, or checked now as root (a few seconds)."""
    if os.geteuid() == 0:
        return policy_for_this_boot()
    return cached_policy()


def _function(
    path: str,
    info: ElfInfo,
    f: FunctionSymbol,
    policy: EntryPolicy | None,
    pid: int | None,
    source: str | None = None,
) -> dict[str, Any]:
    name = name_of(f.name, f.source)
    out: dict[str, Any] = {"name": name.display, "address": f.address, "size": f.size}
    out["ifunc"] = f.ifunc
    if name.display != f.name:
        out["symbol"] = f.name  # as the ELF file has it
    try:
        # Without the boot's verdicts nothing is refused here, so none is said.
        refusal = (policy or EntryPolicy.trusting()).refusal
        planned = plan_function(path, info, f, refusal, pid, source, retime=False)
        out["entry"], out["cost_class"] = planned.entry, planned.cost_class
        if policy is not None:
            out["refused"] = planned.refused
    except IfuncError as exc:
        out["entry"], out["cost_class"] = None, None
        if policy is not None:
            out["refused"] = str(exc)
    return out


def describe(
    path: str,
    pattern: str,
    functions: bool,
    usdt: bool,
    policy: EntryPolicy | None = None,
    pid: int | None = None,
    source: str | None = None,
    read: ElfReader = read_elf,
) -> dict[str, Any]:
    """What `list` says of one file; SOURCE: where it is read, when not at PATH."""
    info = read(source or path)
    entry: dict[str, Any] = {"path": path, "stripped": info.stripped}
    if functions:
        entry["functions"] = [
            _function(path, info, f, policy, pid, source)
            for f in info.functions
            if matches(name_of(f.name, f.source), pattern)
        ]
    if usdt:
        # One entry per probe, like tplist; a probe the compiler inlined has many sites.
        probes: dict[tuple[str, str], dict[str, Any]] = {}
        for u in info.usdt:
            if not (
                fnmatch.fnmatchcase(u.name, pattern) or fnmatch.fnmatchcase(u.provider, pattern)
            ):
                continue
            p = probes.setdefault(
                (u.provider, u.name),
                {
                    "provider": u.provider,
                    "name": u.name,
                    "locations": [],
                    "arguments": u.arg_specs,
                    "semaphore": u.semaphore or None,
                },
            )
            p["locations"].append(u.address)
        entry["usdt"] = list(probes.values())
    return entry


# Another's describe(): (path, source, functions wanted) -> the file's object.
Describer = Callable[[str, str, bool], dict[str, Any]]


def list_objects(
    pid: int | None,
    binary: str | None,
    pattern: str,
    functions: bool,
    usdt: bool,
    every_object: bool,
    policy: EntryPolicy | None,
    sources: dict[str, str] | None = None,
    read: ElfReader = read_elf,
    describer: Describer | None = None,
) -> list[dict[str, Any]]:
    """`list --json`'s objects. TargetError, NotELFError, OSError say what is wrong.
    SOURCES: where each file is read, READ how (see iter_candidates()); DESCRIBER: who
    describes each file, when not this process (the agent: the user's parser)."""

    def one(path: str, source: str, want: bool, pid: int | None) -> dict[str, Any]:
        if describer is not None:
            return describer(path, source, want)
        return describe(path, pattern, want, usdt, policy, pid, source, read)

    if pid is not None:
        check_pid(pid)
        root = mount_root(pid)
        objects = []
        for i, path in enumerate(mapped_files(pid)):
            source = path if sources is None else sources.get(path)
            if source is None:
                continue
            want = functions and (every_object or i == 0)
            d = one(path, source, want, pid)
            if root:  # a container's process: its paths as it sees them, what specs name
                d["path"], d["container_root"] = path[len(root) :], root
            objects.append(d)
        return objects
    assert binary is not None
    # A file here first; else a library or program name, resolved like bcc's tplist -l.
    if sources is not None:
        return [one(binary, sources[binary], functions, None)]
    path = binary if os.path.isfile(binary) else resolve_target(binary)
    return [describe(path, pattern, functions, usdt, policy)]
