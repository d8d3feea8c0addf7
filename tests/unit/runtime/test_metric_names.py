"""Metric names declared once (runtime/metric_names.py): the exporter declares every
family it yields from there, and the dashboard and the cluster view ask for nothing
else."""

from __future__ import annotations

import inspect
import json
import re

from adaptyst_top.agent.exporter import collector as metrics
from adaptyst_top.runtime import cluster, metric_names
from tests.support.paths import REPO

NAME = re.compile(r"\badaptyst_[a-z_]+\b")


def test_the_dashboard_asks_for_exported_series_only() -> None:
    board = json.loads((REPO / "dashboards" / "adaptyst-top.json").read_text())
    asked = set(NAME.findall(json.dumps(board))) - {"adaptyst_top"}
    assert asked and asked <= metric_names.exposed(), asked - metric_names.exposed()


def test_no_name_is_written_out_again() -> None:
    for module in (metrics, cluster):
        found = set(NAME.findall(inspect.getsource(module))) - {"adaptyst_top"}
        assert found == set(), (module.__name__, found)


def test_every_declared_family_is_a_counter_or_a_gauge_or_named_apart() -> None:
    declared = {v for k, v in vars(metric_names).items() if k.isupper() and isinstance(v, str)}
    apart = {metric_names.TASK_PLACEMENT, metric_names.PROBE_LATENCY}
    assert declared == set(metric_names.COUNTERS) | set(metric_names.GAUGES) | apart
