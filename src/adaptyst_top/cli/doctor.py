"""`adaptyst-top doctor`: which capabilities this machine has, and the fix for each."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import replace

from adaptyst_top.cli.options import Parser, add_version
from adaptyst_top.system.capability import Capability


def doctor_parser() -> argparse.ArgumentParser:
    from adaptyst_top.collectors.devices.sources import source_names

    p = Parser(
        prog="adaptyst-top doctor",
        description=f"Check each capability: ebpf, {', '.join(source_names())}. "
        "Exit status 0 when the monitor can run at all.",
    )
    add_version(p)
    p.add_argument("--json", action="store_true", help="one JSON array on stdout")
    p.add_argument(
        "--no-smoke", action="store_true", help="skip the one-probe eBPF smoke test (~1 s)"
    )
    p.add_argument("--agent", metavar="PATH", help="the node agent's socket to ask about")
    return p


def through_agent(caps: list[Capability]) -> list[Capability]:
    """CAPS, where a user's agent answers: eBPF denied to them needs no fix (it said
    "run as root" right above "agent ok", which is all a user needs)."""
    agent = next((c for c in caps if c.name == "agent"), None)
    if agent is None or agent.status != "ok" or os.geteuid() == 0:
        return caps
    return [
        replace(c, fix="none needed: the agent attaches your probes (see agent)")
        if c.name == "ebpf" and not c.usable
        else c
        for c in caps
    ]


def cmd_doctor(argv: Sequence[str]) -> int:
    from adaptyst_top.cli.options import agent_socket
    from adaptyst_top.collectors.doctor import can_run, run_doctor
    from adaptyst_top.runtime.remote.check import check_agent, check_agent_memory
    from adaptyst_top.snapshot.inert import inert

    args = doctor_parser().parse_args(argv)
    sock = agent_socket(args.agent)
    memory = check_agent_memory(sock)
    caps = through_agent(
        [
            *run_doctor(run_smoke=not args.no_smoke),
            check_agent(sock),
            *([memory] if memory is not None else []),
        ]
    )
    if args.json:
        print(json.dumps([c.to_json() for c in caps], indent=None))
    else:
        width = max(len(c.name) for c in caps)
        for c in caps:  # a detail may hold a path the user typed: shown, never acted on
            fix = f"  fix: {inert(c.fix)}" if c.fix and c.status != "ok" else ""
            print(f"{c.name:<{width}}  {c.status:<8}  {inert(c.detail)}{fix}")
    return 0 if can_run(caps) else 1
