"""`adaptyst-top list`: what a process or binary offers to probe, like bcc's tplist."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from adaptyst_top.collectors.attach_plan import plan_function
from adaptyst_top.collectors.elf_info import ElfInfo, FunctionSymbol, NotELFError, read_elf
from adaptyst_top.collectors.entry_safety import EntryPolicy, cached_policy, policy_for_this_boot
from adaptyst_top.collectors.ifunc import IfuncError
from adaptyst_top.collectors.targets import TargetError, check_pid, mapped_files, resolve_target
from adaptyst_top.tui.cli_common import Parser, add_version


def list_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top list",
        description="Function symbols (name, address, size) and USDT probes (provider, name, "
        "arguments, semaphore) of a binary, or of a process: its executable's functions and "
        "the USDT probes of everything it maps (--all: every mapped object's functions too).",
    )
    add_version(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--pid", type=int)
    src.add_argument(
        "--binary", metavar="PATH", help="an ELF file, or a library/program name (c, m, python3)"
    )
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--all", action="store_true", help="with --pid: functions of every object")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--functions", action="store_true", help="functions only")
    what.add_argument("--usdt", action="store_true", help="USDT probes only")
    p.add_argument("pattern", nargs="?", default="*", help="glob on names (default: all)")
    return p


def _entry_policy() -> EntryPolicy | None:
    """The boot's entry-check verdicts: cached, or checked now as root (a few seconds)."""
    if os.geteuid() == 0:
        return policy_for_this_boot()
    return cached_policy()


def _function(
    path: str, info: ElfInfo, f: FunctionSymbol, policy: EntryPolicy | None, pid: int | None
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "address": f.address, "size": f.size, "ifunc": f.ifunc}
    if policy is not None:
        try:
            planned = plan_function(path, info, f, policy.refusal, pid)
            out["entry"], out["refused"] = planned.entry, planned.refused
        except IfuncError as exc:
            out["entry"], out["refused"] = None, str(exc)
    return out


def _describe(
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
            if fnmatch.fnmatchcase(f.name, pattern)
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


def cmd_list(argv: Sequence[str]) -> int:
    args = list_parser().parse_args(argv)
    want_f, want_u = not args.usdt, not args.functions
    policy = _entry_policy() if want_f else None
    try:
        if args.pid is not None:
            check_pid(args.pid)
            files = mapped_files(args.pid)
            objects = [
                _describe(
                    path, args.pattern, want_f and (args.all or i == 0), want_u, policy, args.pid
                )
                for i, path in enumerate(files)
            ]
        else:
            # A file here first; else a library or program name, resolved like bcc's
            # tplist -l (`c` is libc).
            path = args.binary if os.path.isfile(args.binary) else resolve_target(args.binary)
            objects = [_describe(path, args.pattern, want_f, want_u, policy)]
    except (TargetError, NotELFError, FileNotFoundError, PermissionError) as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"objects": objects}))
        return 0
    if want_f and policy is None:
        print(
            "(which functions a probe would refuse is known once root has run the entry "
            "check on this boot: `sudo adaptyst-top list ...`)"
        )
    for obj in objects:
        funcs, probes = obj.get("functions"), obj.get("usdt")
        if not funcs and not probes and args.pid is not None and obj is not objects[0]:
            continue
        stripped = "  (stripped: exported functions only)" if obj["stripped"] else ""
        print(f"{obj['path']}{stripped}")
        for f in funcs or []:
            kind = "ifunc" if f["ifunc"] else "func "
            print(f"  {kind} {f['name']:<40} 0x{f['address']:<12x} {f['size']:>8}")
            if f.get("refused"):
                print(f"        {f['refused']}")
        for u in probes or []:
            sem = f" semaphore=0x{u['semaphore']:x}" if u["semaphore"] else ""
            print(
                f"  usdt  {u['provider'] + ':' + u['name']:<40} locations={len(u['locations'])} "
                f"args={len(u['arguments'])} [{' '.join(u['arguments'])}]{sem}"
            )
    return 0
