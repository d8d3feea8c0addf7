"""`adaptyst-top agent`: the node agent in the foreground (systemd runs it as root)."""

from __future__ import annotations

import argparse
import grp
import os
import resource
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptyst_top.cli.options import Parser, add_version
from adaptyst_top.runtime.remote.settings import DEFAULT_CONFIG

if TYPE_CHECKING:
    from adaptyst_top.agent.core.server import Agent
    from adaptyst_top.runtime.remote.settings import AgentSettings


def agent_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top agent",
        description="The node agent (root, in the foreground): users probe their own "
        "processes through it, with --agent or, when not root, by default. Who may probe "
        "what is decided from the kernel's credentials of each connection.",
    )
    add_version(p)
    p.add_argument(
        "--socket", metavar="PATH", help="where to listen (/run/adaptyst-top/agent.sock)"
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help=f"the agent's settings, TOML (every key with its default: {DEFAULT_CONFIG} as "
        "`make install-agent` writes it); default that file when it exists",
    )
    p.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (devices, probes, the agent)",
    )
    p.add_argument(
        "--node-name",
        metavar="NAME",
        help="the metrics' node label (default: the short host name; for tests and "
        "containers whose host name is not the node's)",
    )
    p.add_argument(
        "--textfile",
        metavar="DIR",
        help="write the same metrics to DIR/adaptyst_top.prom every 15 s, atomically, for "
        "node_exporter's textfile collector",
    )
    return p


def cmd_agent(argv: Sequence[str]) -> int:
    args = agent_parser().parse_args(argv)
    from adaptyst_top.agent.core import kept_workers
    from adaptyst_top.agent.core.listen import AgentError
    from adaptyst_top.agent.core.preload import Preload
    from adaptyst_top.agent.core.server import Agent
    from adaptyst_top.runtime.remote.settings import load_settings
    from adaptyst_top.system.sd_notify import Notifier

    try:
        settings = load_settings(args.config)
        admin = settings.admin_group
        admin_gid = grp.getgrnam(admin).gr_gid if admin else None
    except ValueError as exc:
        print(f"adaptyst-top agent: {exc}", file=sys.stderr)
        return 1
    except KeyError:
        print(f"adaptyst-top agent: admin_group {admin!r}: no such group", file=sys.stderr)
        return 1
    path = Path(args.socket or settings.socket)
    kept_workers.limit(settings.max_workers)
    # Every user's pinned files, probes and connections are descriptors of this one
    # process: the soft limit (1024 under systemd) is raised to the hard one.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        agent = Agent(path, admin_gid, settings, Notifier())
    except AgentError as exc:
        print(f"adaptyst-top agent: {exc}", file=sys.stderr)
        return 1

    try:
        stops = _export(agent, args, settings)
    except (ValueError, OSError) as exc:
        agent.stop()
        print(f"adaptyst-top agent: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 1

    def on_signal(_signum: int, _frame: object) -> None:
        agent.request_stop()  # the main thread leaves serve_forever() and stops the rest

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    print(f"adaptyst-top agent: listening on {path}", file=sys.stderr, flush=True)
    warm = Preload(settings.spare_workers)
    try:
        warm.start()
        agent.serve_forever()
    finally:  # an error out of the loop still ends every session and exporter
        for stop in stops:
            stop()
        agent.stop()
        warm.close()
    return 0


def _export(agent: Agent, args: argparse.Namespace, settings: AgentSettings) -> list[Any]:
    """--metrics and --textfile started; what stops them."""
    if not args.metrics and not args.textfile:
        return []
    from adaptyst_top.agent.exporter import collector as metrics
    from adaptyst_top.agent.exporter import export as metrics_export

    collector = metrics.AgentCollector(
        metrics_export.node_devices(settings.power_model),
        agent.probe_sources,
        settings.probe_metrics,  # type: ignore[arg-type]  # checked: one of PROBE_EXPORTS
        settings.max_probe_series,
        node=args.node_name,
        energy_period_s=settings.metrics_energy_period_s,
    )
    registry = metrics_export.registry_for(collector)
    agent.exports_probes = settings.probe_metrics != "none"
    stops = []
    if args.metrics:
        stops.append(metrics_export.serve(registry, args.metrics))
        print(f"adaptyst-top agent: metrics on http://{args.metrics}/metrics", file=sys.stderr)
    if args.textfile:
        writer = metrics_export.TextfileWriter(
            registry, Path(args.textfile), metrics_export.TEXTFILE_PERIOD_S
        )
        stops.append(writer.close)
    return stops


def bridge_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top bridge",
        description="Join standard input and output to this node's agent: what "
        "`adaptyst-top --host NODE` runs there through ssh.",
    )
    add_version(p)
    p.add_argument("--agent", metavar="PATH", help="the agent's socket (the default one)")
    p.add_argument(
        "--ranks",
        metavar="PID,...",
        help="print the MPI rank each of your processes PID names (JSON) and exit: what a "
        "job's view on a login node asks of each node",
    )
    p.add_argument(
        "--job",
        metavar="ID",
        help="with --nodes: relay job ID's view of those nodes (each through `ssh NODE "
        "adaptyst-top bridge`), merged: what a view of a job on many nodes runs on the "
        "first of each group",
    )
    p.add_argument("--nodes", metavar="NODE,...", help="the nodes a relay reaches (with --job)")
    return p


def cmd_bridge(argv: Sequence[str]) -> int:
    from adaptyst_top.agent.bridge import bridge, print_ranks
    from adaptyst_top.runtime.remote.defaults import AGENT_ENV, DEFAULT_SOCKET

    parser = bridge_parser()
    args = parser.parse_args(argv)
    if args.ranks is not None:
        return print_ranks(args.ranks)
    if args.job is not None or args.nodes is not None:
        return relay_job(parser, args.job, args.nodes)
    return bridge(args.agent or os.environ.get(AGENT_ENV) or str(DEFAULT_SOCKET))


def relay_job(parser: argparse.ArgumentParser, job: str | None, nodes: str | None) -> int:
    """`bridge --job ID --nodes A,B`: a relay of the job's view of those nodes, until
    standard input ends, a TERM or a HUP (its nodes' links closed on every way out)."""
    from adaptyst_top.runtime.job_relay import Relay, RelayError, relay_args, serve

    if job is None or nodes is None:
        parser.error("--job and --nodes go together")
    try:
        relay = Relay(*relay_args(job, nodes))
    except RelayError as exc:
        parser.error(str(exc))
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(0))
    return serve(relay)
