"""The cluster view against a Prometheus that answers wrongly: a small HTTP server of
the test's own, on 127.0.0.1. Every bad answer is one line (or a skipped series,
counted), a server that drips bytes is cut off at the request's deadline, and `q`
quits while a query is under way."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from adaptyst_top.runtime.cluster import MAX_ANSWER, ClusterError, Prometheus, read_cluster
from adaptyst_top.tui.cluster_app import ClusterApp

Answer = Callable[[BaseHTTPRequestHandler], None]


def json_answer(value: object) -> Answer:
    def send(h: BaseHTTPRequestHandler) -> None:
        body = json.dumps(value).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return send


def drip(h: BaseHTTPRequestHandler) -> None:
    """A status line a byte at a time, for ever (until the client goes)."""
    try:
        for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" * 1000:
            h.wfile.write(bytes([b]))
            h.wfile.flush()
            time.sleep(0.1)
    except OSError:
        pass


def huge(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    pad = b" " * (1 << 20)
    try:
        h.wfile.write(b'{"status":"success","data":{"resultType":"vector","result":[]}')
        for _ in range((MAX_ANSWER >> 20) + 4):
            h.wfile.write(pad)
        h.wfile.write(b"}")
    except OSError:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, Answer]]]:
    """(its URL, {"answer": what each request gets}) on 127.0.0.1."""
    behaviour: dict[str, Answer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            behaviour["answer"](self)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", behaviour
    finally:
        httpd.shutdown()
        httpd.server_close()


def cluster_cli(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "cluster", "--prometheus", url],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def one_line_failure(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert words in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ({"status": "success", "data": []}, "without a result list"),
        ({"status": "error", "error": "bad_data: \x1b]0;owned\x07"}, "bad_data"),
        ([1, 2], "not a success"),
    ],
)
def test_an_answer_of_the_wrong_shape_is_one_line(
    server: tuple[str, dict[str, Answer]], answer: object, words: str
) -> None:
    url, behaviour = server
    behaviour["answer"] = json_answer(answer)
    with pytest.raises(ClusterError, match=words):
        read_cluster(Prometheus(url))
    done = cluster_cli(url)
    one_line_failure(done, words)
    assert "\x1b" not in done.stderr


def test_series_of_the_wrong_shape_are_skipped_and_counted(
    server: tuple[str, dict[str, Answer]],
) -> None:
    url, behaviour = server
    good = {"metric": {"node": "cn1"}, "value": [0, str(time.time())]}
    result = [
        1,
        "x",
        {"metric": ["node"], "value": [0, "1"]},
        {"metric": {"node": 5}, "value": [0, str(time.time())]},  # a number: read as text
        {"metric": {"node": "cn2"}, "value": "7"},
        good,
    ]
    behaviour["answer"] = json_answer(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    )
    prom = Prometheus(url)
    rows = read_cluster(prom)
    assert [r.node for r in rows] == ["5", "cn1"]
    assert prom.skipped > 0 and prom.skipped % 4 == 0  # four bad series in every query


def test_a_bad_url_is_one_line() -> None:
    one_line_failure(cluster_cli("http://[::1"), "Invalid IPv6 URL")
    one_line_failure(cluster_cli("http://127.0.0.1:99999"), "out of range")


def test_an_answer_past_the_cap_is_refused(server: tuple[str, dict[str, Answer]]) -> None:
    url, behaviour = server
    behaviour["answer"] = huge
    with pytest.raises(ClusterError, match="larger than"):
        Prometheus(url, timeout=30).query("up")


def test_a_server_that_drips_is_cut_off_at_the_deadline(
    server: tuple[str, dict[str, Answer]],
) -> None:
    url, behaviour = server
    behaviour["answer"] = drip
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            Prometheus(url, timeout=1.0).query("up")
        except BaseException as exc:
            outcome.append(exc)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(30)  # each read of the drip comes in 0.1 s: only a total deadline ends it
    assert not asker.is_alive(), "the query still waits on a dripping server"
    assert len(outcome) == 1 and isinstance(outcome[0], ClusterError)
    assert "no whole answer within 1 s" in str(outcome[0])


async def test_q_quits_while_a_query_is_under_way(server: tuple[str, dict[str, Answer]]) -> None:
    url, behaviour = server
    behaviour["answer"] = drip
    app = ClusterApp(Prometheus(url, timeout=120), interval=3600)

    async def session() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.5)  # the first query is under way, dripping
            await pilot.press("q")
            await pilot.pause(0.2)

    await asyncio.wait_for(session(), timeout=30)
    assert app.return_code in (0, None)
