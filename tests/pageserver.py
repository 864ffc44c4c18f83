"""A real HTTP server on loopback whose answers tests script: pages, delays, errors, bad gzip.

Faults a scraper meets in the field are answers here: a delay, a status, a body that is not
gzip, one that never ends, one of a given size streamed without being held in memory
(`stream_bytes`: the size cap must cut it, and `Script.sent` says how much went out), and bytes
that are not HTTP at all (`raw`). A route may be replaced while the server runs (assign to
`script.routes[path]`), and a server may be stopped and another started on the same port
(`PageServer(port=...)`): a server killed and restarted. Given an `ssl.SSLContext` (`tls=`),
the same server speaks HTTPS.
"""

from __future__ import annotations

import contextlib
import gzip
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STREAM_CHUNK = 64 * 1024


@dataclass
class Answer:
    body: bytes = b""
    status: int = 200
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    delay_s: float = 0.0
    gzip: bool = False
    raw_encoding: str | None = None
    endless: bool = False
    stream_bytes: int = 0
    """> 0: a body of this many bytes (`body` repeated), announced and streamed in chunks."""
    raw: bytes | None = None
    """Sent as the whole response instead of HTTP (no status line, no headers)."""
    chunked: bool = False
    """The body sent with `Transfer-Encoding: chunked`, in three chunks (a streaming server)."""
    location: str | None = None
    """Sent as the Location header: with a 3xx status, a redirect."""
    hangup: bool = False
    """Read the request, then close the connection without a byte of answer."""


@dataclass
class Script:
    """path -> answer (or a callable returning one); requests seen are kept."""

    routes: dict[str, Answer | Callable[[], Answer]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    sent: int = 0
    """Body bytes written by `stream_bytes` answers (what the client made the server send)."""
    guard: Callable[[dict[str, str]], Answer | None] | None = None
    """Sees each request's headers first; an answer it returns is the answer (a proxy's 401)."""
    connections: int = 0
    """TCP connections accepted (with `keep_alive_s`, polls share them)."""
    targets: list[str] = field(default_factory=list)
    """Each request's target as sent (path and query): `requests` keeps the path alone."""


class _Server(ThreadingHTTPServer):
    request_queue_size = 128
    """Room for a fleet's polls at once: the default backlog of 5 drops the rest of a burst of
    connections, whose SYNs the kernel then retries a second later (a timeout, not a fault)."""


class PageServer:
    def __init__(
        self,
        script: Script | None = None,
        *,
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        keep_alive_s: float | None = None,
    ) -> None:
        """`keep_alive_s`: speak HTTP/1.1 and keep connections open between requests, closing
        one idle that long (as uvicorn, vLLM's server, does after 5 s); else HTTP/1.0, one
        request per connection."""
        self.script = script or Script()
        script_ref = self.script

        class Handler(BaseHTTPRequestHandler):
            if keep_alive_s is not None:
                protocol_version = "HTTP/1.1"
                timeout = keep_alive_s

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                script_ref.connections += 1
                super().setup()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.do_GET()

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                headers = dict(self.headers.items())
                script_ref.requests.append((path, headers))
                script_ref.targets.append(self.path)
                route = script_ref.routes.get(path)
                guarded = script_ref.guard(headers) if script_ref.guard else None
                if guarded is not None:
                    route = guarded
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "9")
                    self.end_headers()
                    self.wfile.write(b"not found")
                    return
                answer = route() if callable(route) else route
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                if answer.hangup:
                    self.close_connection = True
                    return
                if answer.raw is not None:
                    with contextlib.suppress(OSError):
                        self.wfile.write(answer.raw)
                    self.close_connection = True
                    return
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
                if answer.location is not None:
                    self.send_header("Location", answer.location)
                if answer.stream_bytes:
                    self._stream(answer)
                    return
                if answer.chunked:
                    self._chunked(body)
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

            def _chunked(self, body: bytes) -> None:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                third = len(body) // 3 + 1
                with contextlib.suppress(OSError):
                    for at in range(0, len(body), third):
                        piece = body[at : at + third]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.write(b"0\r\n\r\n")

            def _stream(self, answer: Answer) -> None:
                unit = answer.body or b"#\n"
                chunk = (unit * (STREAM_CHUNK // len(unit) + 1))[:STREAM_CHUNK]
                self.send_header("Content-Length", str(answer.stream_bytes))
                self.end_headers()
                left = answer.stream_bytes
                try:
                    while left > 0:
                        piece = chunk[: min(left, len(chunk))]
                        self.wfile.write(piece)
                        script_ref.sent += len(piece)
                        left -= len(piece)
                except OSError:
                    return

        self._server = _Server(("127.0.0.1", port), Handler)
        if tls is not None:  # the handshake runs in each request's thread, not in accept()
            self._server.socket = tls.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.scheme = "https" if tls is not None else "http"
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> PageServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop answering and close the port: connections are refused from now on."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
