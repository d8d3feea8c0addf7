"""`adaptyst-top list`: what a process or binary offers to probe, like bcc's tplist."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from adaptyst_top.cli.options import Parser, add_version, agent_socket
from adaptyst_top.collectors.probes.cost.overhead import UPROBE_OPTIMIZED
from adaptyst_top.collectors.probes.elf.elf_info import NotELFError
from adaptyst_top.runtime.listing import entry_policy, list_objects
from adaptyst_top.runtime.python_listing import python_object
from adaptyst_top.runtime.remote.client import AgentRefused, AgentUnavailable
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.targets import TargetError


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
    p.add_argument(
        "--agent",
        metavar="PATH",
        help="ask the node agent (what you may probe; $ADAPTYST_TOP_AGENT; when not root, "
        "the default socket when it is there)",
    )
    return p


def _list_through(agent: str, request: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    from adaptyst_top.runtime.remote.client import AgentConnection

    conn = AgentConnection(agent)
    try:
        answer = conn.list_objects(request)
    finally:
        conn.close()
    return answer


def cmd_list(argv: Sequence[str]) -> int:
    args = list_parser().parse_args(argv)
    want_f, want_u = not args.usdt, not args.functions
    agent = agent_socket(args.agent)
    binary = args.binary
    if binary is not None and "/" in binary:
        binary = os.path.abspath(binary)  # the agent runs elsewhere
    request = {
        "pid": args.pid,
        "binary": binary,
        "pattern": args.pattern,
        "functions": want_f,
        "usdt": want_u,
        "all": args.all,
    }
    try:
        if agent is not None:
            # The agent lists what this user may see, with the boot's entry verdicts.
            objects, policy_known = _list_through(agent, request)
        else:
            policy = entry_policy() if want_f else None
            objects = list_objects(
                args.pid, args.binary, args.pattern, want_f, want_u, args.all, policy
            )
            policy_known = policy is not None
    except (TargetError, NotELFError, FileNotFoundError, PermissionError) as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return 1
    except (AgentUnavailable, AgentRefused, OSError, ValueError) as exc:
        # A link that broke or timed out (OSError), an answer of the wrong shape.
        print(f"adaptyst-top: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 1
    # A Python process's own functions (read here, as the user), before its ELF objects.
    python = python_object(args.pid, args.pattern) if args.pid is not None and want_f else None
    if python is not None:
        objects.insert(0, python)
    if args.json:
        print(json.dumps({"objects": objects}))
        return 0
    if want_f and not policy_known:
        print(
            "(which functions a probe would refuse is known once root has run the entry "
            "check on this boot: `sudo adaptyst-top list ...`)"
        )
    for obj in objects:
        if "python_functions" in obj:
            print(f"{inert(obj['path'])}  (Python {obj['python']}: time one with its spec)")
            for f in obj["python_functions"]:
                print(f"  py    {f['name']:<40} line {f['line']:<7} {inert(f['spec'])}")
            continue
        funcs, probes = obj.get("functions"), obj.get("usdt")
        if not funcs and not probes and args.pid is not None and obj is not objects[bool(python)]:
            continue
        stripped = "  (stripped: exported functions only)" if obj["stripped"] else ""
        inside = f"  (in a container: {obj['container_root']})" if obj.get("container_root") else ""
        print(f"{inert(obj['path'])}{stripped}{inside}")
        for f in funcs or []:
            kind = "ifunc" if f["ifunc"] else "func "
            fast = "  optimized" if f.get("cost_class") == UPROBE_OPTIMIZED else ""
            print(f"  {kind} {inert(f['name']):<40} 0x{f['address']:<12x} {f['size']:>8}{fast}")
            if f.get("refused"):
                print(f"        {inert(f['refused'])}")
        if isinstance(obj.get("more"), int):  # the agent's answer stops at its cap
            print(f"  ... and {obj['more']} more functions: give a pattern to see them")
        for u in probes or []:
            sem = f" semaphore=0x{u['semaphore']:x}" if u["semaphore"] else ""
            print(
                f"  usdt  {inert(u['provider'] + ':' + u['name']):<40} "
                f"locations={len(u['locations'])} "
                f"args={len(u['arguments'])} [{inert(' '.join(u['arguments']))}]{sem}"
            )
    fast = sum(
        f.get("cost_class") == UPROBE_OPTIMIZED for o in objects for f in o.get("functions") or []
    )
    if fast:
        print(
            f"{fast} function{'s' if fast > 1 else ''} start{'s' if fast == 1 else ''} on a 5-byte "
            "nop: probed through the kernel's fast path (docs/probes.md)"
        )
    return 0
