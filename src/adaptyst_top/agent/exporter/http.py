"""/metrics over HTTP without a thread per connection: one asyncio loop holds every
connection while it sends its request (each within HEADER_TIMEOUT_S, all of it), and
one worker thread renders the registry for the requests that are complete. A local
user's 200 slow or silent connections (slowloris) cost sockets, not the scrape slots
of prometheus-client's threaded server, so honest scrapes keep being answered (5 of 25
failed before). At MAX_CONNECTIONS the oldest connection still sending its request is
dropped for the new one."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

HEADER_TIMEOUT_S = 5.0  # a request not whole by then is dropped
MAX_HEADER_BYTES = 16 * 1024
MAX_CONNECTIONS = 512  # sending their request at once; the oldest goes for a new one
RENDER_REUSE_S = 1.0  # a render answers every request that comes within this


class MetricsServer:
    """Serves REGISTRY at HOST:PORT until stop()."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self._render = ThreadPoolExecutor(1, thread_name_prefix="metrics-render")
        self._waiting: dict[asyncio.Task[None], float] = {}  # still sending: since when
        self._renders: dict[str, tuple[float, asyncio.Future[bytes]]] = {}  # by content type
        self._loop = asyncio.new_event_loop()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))  # an error here is the caller's, at once
        self._sock.listen(128)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-http", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, sock=self._sock, limit=MAX_HEADER_BYTES)
        )
        self._ready.set()
        self._loop.run_forever()
        # Stopped: every connection closed before the loop is (none left to a GC).
        self._server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        assert me is not None
        if len(self._waiting) >= MAX_CONNECTIONS:
            oldest = min(self._waiting, key=self._waiting.__getitem__)
            oldest.cancel()
        self._waiting[me] = self._loop.time()
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT_S)
            finally:
                self._waiting.pop(me, None)
            status, ctype, body = await self._answer(head)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}"
                "\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await asyncio.wait_for(writer.drain(), HEADER_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.transport.abort()  # a reader that stalls: its unsent bytes go at once
        except (OSError, asyncio.CancelledError):
            writer.transport.abort()
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ", 1)[0]
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET /metrics\n"
        accept = next(
            (
                v.strip()
                for k, _, v in (h.partition(":") for h in lines[1:])
                if k.lower() == "accept"
            ),
            "",
        )
        encoder, ctype = choose_encoder(accept)
        # One render serves every request within RENDER_REUSE_S: 6,000 queued GETs had
        # an honest scrape wait 3 s behind as many renders.
        now = self._loop.time()
        made = self._renders.get(ctype)
        if made is None or now - made[0] > RENDER_REUSE_S:
            made = (now, self._loop.run_in_executor(self._render, encoder, self.registry))
            self._renders[ctype] = made
        body = await asyncio.shield(made[1])
        return "200 OK", ctype, b"" if method == "HEAD" else body

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):  # a loop closed already
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._render.shutdown(wait=False)
        with contextlib.suppress(OSError):
            self._sock.close()


def serve(registry: CollectorRegistry, host: str, port: int) -> Callable[[], None]:
    return MetricsServer(registry, host, port).stop
