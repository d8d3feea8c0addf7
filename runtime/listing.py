"""What `list` shows: the function symbols and USDT probes of a binary or of a process's
mapped objects, with each function's first instruction and whether a probe would be
refused there. Shared by the CLI and the agent (which lists for a user what they may)."""

from __future__ import annotations

import fnmatch
import os
from typing import Any

from adaptyst_top.collectors.attach_plan import plan_function
from adaptyst_top.collectors.demangle import demangle, matches
from adaptyst_top.collectors.elf_info import ElfInfo, FunctionSymbol, read_elf
from adaptyst_top.collectors.entry_safety import EntryPolicy, cached_policy, policy_for_this_boot
from adaptyst_top.collectors.ifunc import IfuncError
from adaptyst_top.collectors.targets import check_pid, mapped_files, mount_root, resolve_target


def entry_policy() -> EntryPolicy | None:
    """The boot's entry-check verdicts: cached, or checked now as root (a few seconds)."""
    if os.geteuid() == 0:
        return policy_for_this_boot()
    return cached_policy()


def _function(
    path: str, info: ElfInfo, f: FunctionSymbol, policy: EntryPolicy | None, pid: int | None
) -> dict[str, Any]:
    name = demangle(f.name)
    out: dict[str, Any] = {"name": name.display, "address": f.address, "size": f.size}
    out["ifunc"] = f.ifunc
    if name.display != f.name:
        out["symbol"] = f.name  # as the ELF file has it
    if policy is not None:
        try:
            planned = plan_function(path, info, f, policy.refusal, pid)
            out["entry"], out["refused"] = planned.entry, planned.refused
        except IfuncError as exc:
            out["entry"], out["refused"] = None, str(exc)
    return out


def describe(
    path: str,
    pattern: str,
    functions: bool,
    usdt: bool,
    policy: EntryPolicy | None = None,
    pid: int | None = None,
) -> dict[str, Any]:
    info = read_elf(path)
    entry: dict[str, Any] = {"path": path, "stripped": info.stripped}
    if functions:
        entry["functions"] = [
            _function(path, info, f, policy, pid)
            for f in info.functions
            if matches(demangle(f.name), pattern)
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


def list_objects(
    pid: int | None,
    binary: str | None,
    pattern: str,
    functions: bool,
    usdt: bool,
    every_object: bool,
    policy: EntryPolicy | None,
) -> list[dict[str, Any]]:
    """`list --json`'s objects. TargetError, NotELFError, OSError say what is wrong."""
    if pid is not None:
        check_pid(pid)
        root = mount_root(pid)
        objects = []
        for i, path in enumerate(mapped_files(pid)):
            d = describe(path, pattern, functions and (every_object or i == 0), usdt, policy, pid)
            if root:  # a container's process: its paths as it sees them, what specs name
                d["path"], d["container_root"] = path[len(root) :], root
            objects.append(d)
        return objects
    assert binary is not None
    # A file here first; else a library or program name, resolved like bcc's tplist -l.
    path = binary if os.path.isfile(binary) else resolve_target(binary)
    return [describe(path, pattern, functions, usdt, policy)]
