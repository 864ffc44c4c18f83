"""A server on loopback that speaks Prometheus's query API with answers a test writes.

A real Prometheus (tests/prom.py) answers what a real Prometheus would; the faults vtop must
survive are answers no Prometheus gives but any server behind `--prometheus` may: an `instance`
label that is not a host, JSON nested a million deep, a newline inside a sample value, a
backfill of hundreds of megabytes. This server is real HTTP on 127.0.0.1 (vtop's whole client
runs, redirects, caps and timeouts included) and routes by what vtop asked: the targets query
(`group by (job, instance)`), the latest-scrape query, or a `query_range` backfill. Each route
is a function of the form vtop POSTed; it returns the JSON as a value, raw bytes, or an
iterable of byte chunks (streamed, so a test can send more than it could hold).

`healthy_answers()` is a Prometheus that scrapes one vLLM target, its latest sample the page of
a real vLLM server (tests/fixtures), so a test can break one thing and keep the rest working.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from vtop.signals.parser import parse_head, split_sample
from vtop.sources import promql

REAL_PAGE = Path(__file__).resolve().parent / "fixtures" / "metrics" / "vllm-0.32" / "busy.txt"

Reply = Any
"""What a route returns: a JSON value (sent as JSON), `bytes`, or an iterable of byte chunks."""
Route = Callable[[Mapping[str, str]], Reply]


def answering(reply: Reply) -> Route:
    """A route that gives `reply` whatever vtop asked."""

    def route(form: Mapping[str, str]) -> Reply:
        return reply

    return route


def success(result_type: str, result: list[Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": result_type, "result": result}}


def page_series(page: str, job: str, instance: str) -> list[tuple[dict[str, str], str]]:
    """The samples of a page as Prometheus stores them: (labels with job/instance, value)."""
    out = []
    for line in page.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = split_sample(line, 0)
        name, labels = parse_head(head, 0)
        out.append(({"__name__": name, **dict(labels), "job": job, "instance": instance}, value))
    return out


@dataclass
class Fleet:
    """What a healthy Prometheus knows: targets scraped at `t`, each with a page."""

    targets: dict[tuple[str, str], str] = field(default_factory=dict)
    t: float = field(default_factory=lambda: float(int(time.time())))
    _series: dict[tuple[str, str], list[tuple[dict[str, str], str]]] = field(
        default_factory=dict, repr=False
    )

    def series(self, job: str, instance: str) -> list[tuple[dict[str, str], str]]:
        """`page_series` of a target, parsed once."""
        key = (job, instance)
        if key not in self._series:
            self._series[key] = page_series(self.targets[key], job, instance)
        return self._series[key]

    def instances(self, form: Mapping[str, str]) -> Reply:
        return success("vector", [{"metric": {"job": j, "instance": i}, "value": [self.t, "1"]}
                                  for j, i in self.targets])  # fmt: skip

    def latest(self, form: Mapping[str, str]) -> Reply:
        t = time.time()
        out: list[Any] = []
        for job, instance in self.targets:
            for metric, value in self.series(job, instance):
                out.append({"metric": metric, "value": [t, value]})
            target = {"job": job, "instance": instance}
            out.append({"metric": {"__name__": "up", **target}, "value": [t, "1"]})
            out.append({"metric": {"__name__": "vtop_scrape_timestamp", "vtop": "scrape_time",
                                   **target}, "value": [t, f"{t:.3f}"]})  # fmt: skip
        return success("vector", out)

    def backfill(self, form: Mapping[str, str]) -> Reply:
        """The asked target's page at the two steps before `t` (a short history)."""
        steps = [self.t - 30, self.t - 15]
        out: list[Any] = []
        asked = re.search(r'instance="((?:[^"\\]|\\.)*)"', form.get("query", ""))
        for job, instance in self.targets:
            if asked is not None and asked.group(1) != promql.quote(instance)[1:-1]:
                continue
            for metric, value in self.series(job, instance):
                out.append({"metric": metric, "values": [[at, value] for at in steps]})
            target = {"job": job, "instance": instance}
            out.append({"metric": {"__name__": "up", **target},
                        "values": [[at, "1"] for at in steps]})  # fmt: skip
            out.append({"metric": {"__name__": "vtop_scrape_timestamp", "vtop": "scrape_time",
                                   **target},
                        "values": [[at, f"{at:.3f}"] for at in steps]})  # fmt: skip
        return success("matrix", out)


def healthy_answers(page: str | None = None, *, instance: str = "127.0.0.1:8000") -> Fleet:
    """One vLLM target whose latest scrape is `page` (a real server's busy page by default)."""
    text = page if page is not None else REAL_PAGE.read_text()
    return Fleet({("vllm", instance): text})


class HostilePrometheus:
    """`with HostilePrometheus(instances=..., latest=..., backfill=...) as prom:` (prom.url)."""

    def __init__(
        self,
        fleet: Fleet | None = None,
        /,
        *,
        instances: Route | None = None,
        latest: Route | None = None,
        backfill: Route | None = None,
    ) -> None:
        base = fleet or healthy_answers()
        self.routes: dict[str, Route] = {
            "instances": instances or base.instances,
            "latest": latest or base.latest,
            "backfill": backfill or base.backfill,
        }
        self.asked: list[str] = []
        """Which route answered each request, in order."""
        self.headers: list[dict[str, str]] = []
        self.sent = 0
        """Body bytes written (what vtop made this server send before it hung up)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                server.headers.append(dict(self.headers.items()))
                path = self.path.split("?")[0]
                if path.endswith("/api/v1/query_range"):
                    kind = "backfill"
                elif path.endswith("/api/v1/query"):
                    kind = "instances" if "group by (job, instance)" in form.get(
                        "query", "") else "latest"  # fmt: skip
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                server.asked.append(kind)
                self._send(server.routes[kind](form))

            do_GET = do_POST

            def _send(self, reply: Reply) -> None:
                if isinstance(reply, bytes):
                    chunks: Iterable[bytes] = [reply]
                    length: int | None = len(reply)
                elif isinstance(reply, (dict, list, str, int, float)) or reply is None:
                    body = json.dumps(reply).encode()
                    chunks, length = [body], len(body)
                else:
                    chunks, length = reply, None
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if length is not None:
                    self.send_header("Content-Length", str(length))
                self.end_headers()
                with contextlib.suppress(OSError):  # vtop may hang up once it has enough
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        server.sent += len(chunk)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HostilePrometheus:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def endless_matrix(megabytes: float, *, instance: str = "127.0.0.1:8000") -> Iterable[bytes]:
    """A well-formed matrix answer of about `megabytes` MB, made as it is sent (never held):
    one vLLM series with far more points than any step asked for."""
    head = json.dumps({"__name__": "vllm:num_requests_running", "job": "vllm",
                       "instance": instance, "model_name": "m", "engine": "0"})  # fmt: skip
    yield b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
    yield head.encode() + b',"values":['
    point = b'[1700000000.000,"1"],' * 4096
    for _ in range(int(megabytes * 1e6 / len(point)) + 1):
        yield point
    yield b'[1700000001.000,"1"]]}]}}'
