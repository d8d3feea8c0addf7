"""The one table of subcommands: usage, help and dispatch all come from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # under adaptyst_top.cli, imported only when the command runs
    function: str  # takes the arguments after the name (and, with `takes_command`, CMD)
    summary: str  # one line of `adaptyst-top --help`
    takes_command: bool = False  # `-- CMD ARGS...` launches CMD under the monitor


COMMANDS = (
    Command(
        "demo",
        "demo",
        "cmd_demo",
        "run the built-in demo workload with its probes and the advisor",
        takes_command=True,
    ),
    Command("record", "record", "cmd_record", "headless: one JSON snapshot per interval", True),
    Command("list", "listing", "cmd_list", "function symbols and USDT probes of a PID or binary"),
    Command(
        "doctor",
        "doctor",
        "cmd_doctor",
        "which capabilities this machine has (eBPF, NVML, RAPL, OpenCL, FPGA)",
    ),
    Command("replay", "replay", "cmd_replay", "play a recording in the TUI"),
    Command(
        "export",
        "record",
        "cmd_export",
        "a recording (compact, .zst) as full JSON lines, for jq and other tools; "
        "`--folded` its profile's stacks",
    ),
    Command(
        "agent",
        "agent",
        "cmd_agent",
        "the node agent (root): users probe their own processes through it",
    ),
    Command(
        "bridge",
        "agent",
        "cmd_bridge",
        "this node's agent on standard input and output (what --host and a job's view run over ssh)",
    ),
    Command(
        "cluster",
        "cluster",
        "cmd_cluster",
        "every node (or a Slurm job's) from Prometheus, where the agents' metrics go",
    ),
)
BY_NAME = {c.name: c for c in COMMANDS}


def usage() -> str:
    return (
        "adaptyst-top [--pid PID | --job ID] [--probe SPEC]... [--interval S] [-- CMD ARGS...]\n"
        f"       adaptyst-top {{{','.join(c.name for c in COMMANDS)}}} ..."
    )


def summaries() -> str:
    width = max(len(c.name) for c in COMMANDS)
    return "\n".join(f"  {c.name:<{width}}  {c.summary}" for c in COMMANDS)
