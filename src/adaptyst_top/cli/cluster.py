"""`adaptyst-top cluster`: every node of the cluster (or of one Slurm job) from Prometheus."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from adaptyst_top.cli.options import Parser, add_version, bounded_float

INTERVAL_RANGE = (1.0, 3600.0)


def cluster_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="adaptyst-top cluster",
        usage="adaptyst-top cluster --prometheus URL [--job ID] [--interval S]",
        description="The cluster view: a row per node whose agent Prometheus scrapes "
        "(utilisation, power, energy rate, jobs, slowest probe by p99; a node that stopped "
        "reporting is marked stale). Enter opens a node's live monitor over SSH.",
    )
    add_version(p)
    p.add_argument("--prometheus", required=True, metavar="URL", help="e.g. http://prom:9090")
    p.add_argument("--job", metavar="ID", help="only the nodes running Slurm job ID")
    p.add_argument(
        "--interval",
        type=bounded_float(*INTERVAL_RANGE),
        default=5.0,
        metavar="S",
        help="seconds between refreshes, {:g}..{:g} (5)".format(*INTERVAL_RANGE),
    )
    return p


def cmd_cluster(argv: Sequence[str]) -> int:
    args = cluster_parser().parse_args(argv)
    from adaptyst_top.runtime.cluster import ClusterError, Prometheus
    from adaptyst_top.system.slurm_jobs import JobError, check_job_id
    from adaptyst_top.tui.cluster_app import ClusterApp

    try:
        job = check_job_id(args.job) if args.job else None
        prom = Prometheus(args.prometheus)
        prom.query("vector(1)")  # reachable, and a Prometheus: said now, in one line
    except (ClusterError, JobError) as exc:
        print(f"adaptyst-top: {exc}", file=sys.stderr)
        return 1
    ClusterApp(prom, job, args.interval).run()
    return 0
