"""The cluster view against a Prometheus that answers what cannot be, slowly, or hugely
(a server of the test's own on 127.0.0.1): impossible figures are blank and marked, a
query under way is said at once with its progress and time, an answer of 100,000
series is cut with a word, and `q` quits within a second whatever the fetch is doing."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from adaptyst_top.runtime.cluster import MAX_SERIES, QUERIES, Prometheus, read_cluster
from adaptyst_top.tui.cluster_app import IMPOSSIBLE, ClusterApp, node_cells
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine
from tests.system.prometheus.test_cluster_hostile import Answer, server  # noqa: F401 - the fixture

Series = list[dict[str, object]]


def by_query(series_for: Callable[[str], Series], delay_s: float = 0.0) -> Answer:
    """Each query answered with SERIES_FOR(its PromQL), after DELAY_S."""

    def send(h: BaseHTTPRequestHandler) -> None:
        promql = urllib.parse.parse_qs(urllib.parse.urlparse(h.path).query)["query"][0]
        time.sleep(delay_s)
        result = series_for(promql)
        body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        send_body(h, json.dumps(body).encode())

    return send


def send_body(h: BaseHTTPRequestHandler, body: bytes) -> None:
    try:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    except OSError:
        pass  # the view quit


def sample(value: str, **labels: str) -> dict[str, object]:
    return {"metric": labels, "value": [time.time(), value]}


def impossible_figures(promql: str) -> Series:
    now = str(time.time())
    if "timestamp(" in promql or "adaptyst_time_seconds" in promql:
        huge = {"metric": {"node": "cn5"}, "value": [time.time(), 10**400]}  # no float
        return [
            sample(now, node="cn1"),
            sample(now, node="cn2"),
            sample("-5", node="cn3"),
            sample("1e300", node="cn4"),  # a clock far past ours
            huge,
        ]
    if "utilization" in promql:
        return [sample("7.5", node="cn1", kind="cpu"), sample("0.5", node="cn2", kind="cpu")]
    if "power_watts" in promql:
        return [
            sample("-1e308", node="cn1", kind="cpu"),
            sample("NaN", node="cn2", kind="gpu"),
            sample("300", node="cn2", kind="cpu"),
        ]
    if "energy_joules" in promql:
        return [sample("+Inf", node="cn1", kind="cpu"), sample("250", node="cn2", kind="cpu")]
    if "histogram_quantile" in promql:
        return [sample("-0.5", node="cn1", probe="f"), sample("0.002", node="cn2", probe="g")]
    return []


def test_impossible_figures_are_blank_and_marked(
    server: tuple[str, dict[str, Answer]],  # noqa: F811
) -> None:
    url, behaviour = server
    behaviour["answer"] = by_query(impossible_figures)
    told: list[int] = []
    rows = {r.node: r for r in read_cluster(Prometheus(url), progress=told.append)}
    assert told == list(range(1, QUERIES + 1))
    assert set(rows) == {"cn1", "cn2"}  # -5 s, 1e300 s, 10**400: no node's last sample
    assert rows["cn1"].impossible == {"util:cpu", "power_w:cpu", "energy_w:cpu", "p99"}
    assert rows["cn2"].impossible == {"power_w:gpu"}
    one = node_cells(rows["cn1"])[0]
    assert [one[k] for k in ("cpu", "power", "energy", "p99")] == [IMPOSSIBLE] * 4
    two = node_cells(rows["cn2"])[0]
    assert (two["cpu"], two["power"], two["energy"]) == ("50", IMPOSSIBLE, "250")
    assert two["p99"] == "2 ms g"


async def test_the_view_says_what_it_asks_at_once_and_marks_impossible_values(
    server: tuple[str, dict[str, Answer]],  # noqa: F811
) -> None:
    url, behaviour = server
    behaviour["answer"] = by_query(impossible_figures, delay_s=1.5)
    app = ClusterApp(Prometheus(url, timeout=30), interval=3600)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause(0.5)
        status = app.query_one("#status", TextLine)
        assert status.text.startswith("asking Prometheus: query 1 of 8, "), status.text
        await pilot.pause(1.5)
        first = status.text
        assert first.startswith("asking Prometheus: query "), first
        await pilot.pause(1.0)
        assert status.text != first  # the time runs while the query waits
        deadline = time.monotonic() + 30
        while status.text.startswith("asking") and time.monotonic() < deadline:
            await pilot.pause(0.2)
        assert "2 impossible values" not in status.text
        assert f"5 impossible values (negative, not finite, too large): {IMPOSSIBLE}" in (
            status.text
        )
        assert len(app.query_one(FastTable).rows) == 2


def many_nodes() -> Answer:
    """100,000 nodes in every answer (12 MB), encoded once: the server is in this
    process, and must not take the view's time."""
    now = str(time.time())
    bodies = {
        clock: json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": [
                sample(now if clock else "1", node=f"cn{i:06d}", kind="cpu", probe="f")
                for i in range(100_000)
            ]}}
        ).encode()
        for clock in (True, False)
    }  # fmt: skip

    def send(h: BaseHTTPRequestHandler) -> None:
        promql = urllib.parse.parse_qs(urllib.parse.urlparse(h.path).query)["query"][0]
        send_body(h, bodies["time" in promql])

    return send


async def test_a_huge_answer_is_cut_with_a_word_and_q_quits_within_a_second(
    server: tuple[str, dict[str, Answer]],  # noqa: F811
) -> None:
    url, behaviour = server
    behaviour["answer"] = many_nodes()
    app = ClusterApp(Prometheus(url, timeout=60), interval=3600)

    async def session() -> float:
        async with app.run_test(size=(120, 30)) as pilot:
            status = app.query_one("#status", TextLine)
            deadline = time.monotonic() + 120
            while "not read" not in status.text and time.monotonic() < deadline:
                await pilot.pause(0.2)
            assert f"past the first {MAX_SERIES:,} of an answer: not read" in status.text, (
                status.text
            )
            assert len(app.query_one(FastTable).rows) == MAX_SERIES
            await pilot.press("r")  # another fetch under way
            await pilot.pause(1.0)
            asked = time.monotonic()
            await pilot.press("q")
            return asked

    asked = await asyncio.wait_for(session(), timeout=180)
    assert time.monotonic() - asked < 1.0
