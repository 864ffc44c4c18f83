"""A forward HTTP proxy on loopback for tests: CONNECT tunnels and absolute-form requests.

It does what a corporate proxy does for vtop, on this host only. A name in `hosts` is mapped to
a loopback port (`{"vllm.test": 8123}`), as a real proxy's resolver would map it, so vtop can be
pointed at a URL that is not loopback (and so is proxied) while every byte stays on 127.0.0.1;
a name the map does not know is answered 502, never looked up. Every request it receives is
kept (`requests`: method, target, headers), and `auth` ("user:password") makes it answer 407 to
a request without those credentials.
"""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import socketserver
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str] = field(default_factory=dict)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class ProxyServer:
    def __init__(self, hosts: Mapping[str, int], *, auth: str | None = None) -> None:
        self.hosts = dict(hosts)
        self.requests: list[Seen] = []
        proxy = self
        expected = "Basic " + base64.b64encode(auth.encode()).decode() if auth else None

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(65536).decode("latin-1").strip()
                if not line:
                    return
                method, target, _version = [*line.split(" "), "", ""][:3]
                headers: dict[str, str] = {}
                raw: list[bytes] = []
                while True:
                    header = self.rfile.readline(65536)
                    if header in (b"\r\n", b"\n", b""):
                        break
                    raw.append(header)
                    name, _, value = header.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                proxy.requests.append(Seen(method, target, headers))
                if expected and headers.get("proxy-authorization") != expected:
                    self._answer(b"407 Proxy Authentication Required",
                                 b'Proxy-Authenticate: Basic realm="test"\r\n')  # fmt: skip
                    return
                if method == "CONNECT":
                    host, _, port = target.rpartition(":")
                    upstream = self._open(host, int(port or 443))
                    if upstream is None:
                        return
                    self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    self._relay(upstream)
                    return
                parts = urlsplit(target)
                upstream = self._open(parts.hostname or "", parts.port or 80)
                if upstream is None:
                    return
                path = parts.path or "/"
                if parts.query:
                    path += "?" + parts.query
                kept = [h for h in raw if not h.lower().startswith((b"proxy-", b"connection"))]
                request = f"{method} {path} HTTP/1.1\r\n".encode() + b"".join(kept)
                body = self.rfile.read(int(headers.get("content-length") or 0))
                upstream.sendall(request + b"Connection: close\r\n\r\n" + body)
                self._relay(upstream, one_way=True)

            def _open(self, host: str, port: int) -> socket.socket | None:
                local = proxy.hosts.get(host.lower())
                if local is None:
                    self._answer(b"502 Bad Gateway")
                    return None
                return socket.create_connection(("127.0.0.1", local), timeout=10)

            def _answer(self, status: bytes, extra: bytes = b"") -> None:
                self.wfile.write(b"HTTP/1.1 " + status + b"\r\n" + extra +
                                 b"Content-Length: 0\r\nConnection: close\r\n\r\n")  # fmt: skip

            def _relay(self, upstream: socket.socket, one_way: bool = False) -> None:
                """Bytes both ways until one side closes (`one_way`: the client's request was
                sent already; the answer is relayed until the server closes)."""
                client = self.connection
                with upstream, contextlib.suppress(OSError):
                    ends = [upstream] if one_way else [client, upstream]
                    while True:
                        ready, _, _ = select.select(ends, [], [], 10)
                        if not ready:
                            return
                        for end in ready:
                            data = end.recv(65536)
                            if not data:
                                return
                            (upstream if end is client else client).sendall(data)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ProxyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
