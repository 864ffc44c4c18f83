"""A real HTTP server on loopback whose answers tests script: pages, delays, errors, bad gzip."""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    body: bytes = b""
    status: int = 200
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    delay_s: float = 0.0
    gzip: bool = False
    raw_encoding: str | None = None
    endless: bool = False


@dataclass
class Script:
    """path -> answer (or a callable returning one); requests seen are kept."""

    routes: dict[str, Answer | Callable[[], Answer]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)


class PageServer:
    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        script_ref = self.script

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.do_GET()

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                script_ref.requests.append((path, dict(self.headers.items())))
                route = script_ref.routes.get(path)
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "9")
                    self.end_headers()
                    self.wfile.write(b"not found")
                    return
                answer = route() if callable(route) else route
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                body = gzip.compress(answer.body) if answer.gzip else answer.body
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                if answer.gzip or answer.raw_encoding:
                    self.send_header("Content-Encoding", answer.raw_encoding or "gzip")
                if answer.endless:
                    self.send_header("Content-Length", str(10**9))
                    self.end_headers()
                    try:
                        while True:
                            self.wfile.write(b"# still going\n")
                            self.wfile.flush()
                            time.sleep(0.05)
                    except OSError:
                        return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> PageServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
