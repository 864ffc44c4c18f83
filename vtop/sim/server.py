"""A thread-based HTTP server that answers like a vLLM OpenAI server, backed by a twin.

It serves what vtop reads from a real server: `/metrics` (the twin's page in its dialect),
`/v1/models`, `/version` and `/health`, on loopback by default. A driver thread keeps the twin
at wall time x speed; every request also catches up first, under one lock, so answers are
always current. When the twin's API server is busy (the frontend-bound scenario), `/metrics`
answers late by the virtual time its event loop needs, converted to wall time, with the page
the twin rendered at the instant its loop answered (`Twin.request_metrics`): vtop's own
scrape-latency signal and gauges read what they would on the real server, and the same as
`vtop --demo`, however the driver thread chunks time.

Standard library only (`http.server.ThreadingHTTPServer`): nothing to install, and tests run
it on real sockets. A client that disconnects mid-answer is not an error worth a traceback
(a scraper that times out does it all day); a real error in a handler still prints one.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from vtop.sim.clock import RealTime
from vtop.sim.twin import Twin

MAX_SCRAPE_DELAY_S = 30.0
"""Cap on the wall-clock delay of one /metrics answer (a client would have timed out)."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    sim: SimServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (a scraper's timeout, Ctrl-C on curl, a closed
        browser tab) is normal for a server: nothing is said. Anything else is a bug in the
        simulator and keeps socketserver's traceback on stderr."""
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipe, ConnectionReset, …
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        sim = self.server.sim
        path = self.path.split("?", 1)[0]
        t0 = time.perf_counter()
        if path == "/metrics":
            self._send(200, sim.metrics_page(), CONTENT_TYPE_LATEST)
            return
        if path == "/v1/models":
            body = json.dumps(sim.models()).encode()
        elif path == "/version":
            body = json.dumps({"version": sim.version()}).encode()
        elif path in ("/health", "/ping"):
            body = b""
        else:
            self._json(404, {"detail": "Not Found"})
            return
        self._send(200, body, "application/json")
        sim.note_http(path, "GET", len(body), time.perf_counter() - t0)

    def do_HEAD(self) -> None:
        self._send(200 if self.path in ("/health", "/metrics") else 404, b"", "text/plain")

    def _json(self, status: int, obj: object) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: a scraper polls every second


class SimServer:
    """A running sim server; use as a context manager or call `close()`."""

    def __init__(
        self,
        twin: Twin,
        host: str,
        port: int,
        speed: float,
        *,
        dialect: str | None = None,
        tick_s: float = 0.05,
    ) -> None:
        self.twin = twin
        self.dialect = dialect
        self.clock = RealTime(twin, speed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.sim = self
        address = self._httpd.server_address
        self.host = str(address[0])
        self.port = int(address[1])
        self._serve = threading.Thread(
            target=self._httpd.serve_forever, name=f"vtop-sim-http-{self.port}", daemon=True
        )
        self._drive = threading.Thread(
            target=self._drive_loop, args=(tick_s,), name=f"vtop-sim-drive-{self.port}", daemon=True
        )
        self._serve.start()
        self._drive.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def speed(self) -> float:
        return self.clock.speed

    def _drive_loop(self, tick_s: float) -> None:
        while not self._stop.wait(tick_s):
            with self._lock:
                self.clock.sync()

    # --- answers --------------------------------------------------------------------------------

    def metrics_page(self) -> bytes:
        """The page the twin's API server answers this request with, when it answers it:
        registered now, rendered by the twin at the virtual instant its event loop answers
        (so a driver tick past that instant changes nothing), handed over once wall time has
        caught up with it. A client that would have timed out gets the page as it is then."""
        deadline = time.monotonic() + MAX_SCRAPE_DELAY_S
        with self._lock:
            self.clock.sync()
            ticket = self.twin.request_metrics(self.dialect)
        while True:
            with self._lock:
                self.clock.sync()
                answer = self.twin.answer(ticket)
                if answer is not None:
                    return answer[1]
                wait = self.clock.wall_seconds(self.twin.answer_eta(ticket) - self.twin.now)
            left = deadline - time.monotonic()
            if left <= 0 or self._stop.wait(min(max(wait, 0.001), left)):
                with self._lock:
                    self.twin.forget(ticket)
                    self.clock.sync()
                    return self.twin.metrics_text(self.dialect)

    def models(self) -> dict[str, object]:
        with self._lock:
            info = self.twin.endpoint_info()
        name = info.models[0] if info.models else "unknown"
        return {
            "object": "list",
            "data": [
                {
                    "id": name,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "vllm",
                    "root": name,
                    "parent": None,
                    "max_model_len": info.max_model_len,
                    "permission": [],
                }
            ],
        }

    def note_http(self, handler: str, method: str, response_bytes: int, seconds: float) -> None:
        with self._lock:
            self.twin.note_http(handler, method, response_bytes, seconds)

    def version(self) -> str:
        with self._lock:
            return self.twin.endpoint_info().version or "unknown"

    # --- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._serve.join(timeout=5)
        self._drive.join(timeout=5)

    def __enter__(self) -> SimServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def serve(
    twin: Twin,
    host: str = "127.0.0.1",
    port: int = 0,
    speed: float = 1.0,
    *,
    dialect: str | None = None,
) -> SimServer:
    """Serve `twin` over HTTP on `host:port` (port 0: any free port), `speed` x real time."""
    return SimServer(twin, host, port, speed, dialect=dialect)
