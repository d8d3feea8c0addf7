"""`adaptyst-top list`: what a process or binary offers to probe, like bcc's tplist."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from adaptyst_top.collectors.elf_info import NotELFError, read_elf
from adaptyst_top.collectors.targets import TargetError, check_pid, mapped_files, resolve_target
from adaptyst_top.tui.cli_common import add_version


def list_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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


def _describe(path: str, pattern: str, functions: bool, usdt: bool) -> dict[str, Any]:
    info = read_elf(path)
    entry: dict[str, Any] = {"path": path, "stripped": info.stripped}
    if functions:
        entry["functions"] = [
            {"name": f.name, "address": f.address, "size": f.size, "ifunc": f.ifunc}
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
    try:
        if args.pid is not None:
            check_pid(args.pid)
            files = mapped_files(args.pid)
            objects = [
                _describe(path, args.pattern, want_f and (args.all or i == 0), want_u)
                for i, path in enumerate(files)
            ]
        else:
            # A file here first; else a library or program name, resolved like bcc's
            # tplist -l (`c` is libc).
            path = args.binary if os.path.isfile(args.binary) else resolve_target(args.binary)
            objects = [_describe(path, args.pattern, want_f, want_u)]
    except (TargetError, NotELFError, FileNotFoundError, PermissionError) as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"objects": objects}))
        return 0
    for obj in objects:
        funcs, probes = obj.get("functions"), obj.get("usdt")
        if not funcs and not probes and args.pid is not None and obj is not objects[0]:
            continue
        stripped = "  (stripped: exported functions only)" if obj["stripped"] else ""
        print(f"{obj['path']}{stripped}")
        for f in funcs or []:
            kind = "ifunc" if f["ifunc"] else "func "
            print(f"  {kind} {f['name']:<40} 0x{f['address']:<12x} {f['size']:>8}")
        for u in probes or []:
            sem = f" semaphore=0x{u['semaphore']:x}" if u["semaphore"] else ""
            print(
                f"  usdt  {u['provider'] + ':' + u['name']:<40} locations={len(u['locations'])} "
                f"args={len(u['arguments'])} [{' '.join(u['arguments'])}]{sem}"
            )
    return 0
