"""`vtop tune --load N`: the clients against a real HTTP server that answers as vLLM's OpenAI
server does (/v1/models, /v1/completions), and the load's shape read from real vLLM pages."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from vtop.sources.vllm import ScrapeOptions
from vtop.tune.load import ClosedLoop, Load, LoadShape, parse_shape, shape_from_page

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-0.32"


@dataclass
class Completions:
    """What the stand-in server saw, and whether it answers (a restarting server does not)."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    down: bool = False
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def server() -> Iterator[tuple[str, Completions]]:
    seen = Completions()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if seen.down:
                self._json(503, {"error": "starting"})
            elif self.path == "/v1/models":
                self._json(200, {"data": [{"id": "vtop/engine", "max_model_len": 512}]})
            else:
                self._json(404, {})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if seen.down or self.path != "/v1/completions":
                self._json(503, {"error": "starting"})
                return
            with seen.lock:
                seen.bodies.append(body)
                seen.headers.append(dict(self.headers))
                seen.in_flight += 1
                seen.most_in_flight = max(seen.most_in_flight, seen.in_flight)
            time.sleep(0.05)  # a request takes a while, so the clients overlap
            with seen.lock:
                seen.in_flight -= 1
            self._json(200, {"choices": [{"text": "x"}], "usage": {}})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _wait(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_each_client_keeps_one_request_in_flight_with_the_shape_asked_for(
    server: tuple[str, Completions],
) -> None:
    url, seen = server
    options = ScrapeOptions.from_env(headers=["X-Team: infer"], environ={"VTOP_API_KEY": "k1"})
    load = ClosedLoop(url + "/metrics", 4, parse_shape("100:20"), options, seed=3)
    load.start()
    try:
        _wait(lambda: len(seen.bodies) >= 40)
    finally:
        load.stop()
    assert seen.most_in_flight == 4  # four clients, never more requests than clients
    lengths = [len(b["prompt"]) for b in seen.bodies]
    assert 60 < sum(lengths) / len(lengths) < 140  # log-normal around 100 tokens
    assert all(b["ignore_eos"] is True and b["model"] == "vtop/engine" for b in seen.bodies)
    assert all(all(100 <= t < 500 for t in b["prompt"]) for b in seen.bodies)
    assert all(len(b["prompt"]) + b["max_tokens"] <= 512 for b in seen.bodies)  # max_model_len
    assert all(h.get("Authorization") == "Bearer k1" for h in seen.headers)
    assert all(h.get("X-Team") == "infer" for h in seen.headers)
    counts = load.counts
    assert counts.failed == 0 and counts.finished >= counts.sent - 4  # at most 4 cut by stop()


def test_the_load_rides_out_a_server_that_stops_answering(
    server: tuple[str, Completions],
) -> None:
    url, seen = server
    load = ClosedLoop(url, 2, parse_shape("10:5"), ScrapeOptions(), seed=1)
    load.start()
    try:
        _wait(lambda: load.counts.finished >= 5)
        seen.down = True  # restarting: every request fails
        _wait(lambda: load.counts.failed >= 2)
        before = len(seen.bodies)
        seen.down = False
        _wait(lambda: len(seen.bodies) >= before + 5)  # back within a retry
    finally:
        load.stop()
    assert "503" in load.counts.last_error


def test_stop_ends_every_client_at_once(server: tuple[str, Completions]) -> None:
    url, _ = server
    load = ClosedLoop(url, 8, parse_shape("10:5"), ScrapeOptions())
    load.start()
    _wait(lambda: load.counts.finished >= 8)
    began = time.monotonic()
    load.stop()
    assert time.monotonic() - began < 5
    assert not any(t.name == "vtop-load" and t.is_alive() for t in threading.enumerate())


def test_the_shape_is_the_servers_own_requests() -> None:
    page = (FIXTURES / "kv-exhausted.txt").read_text()
    shape = shape_from_page(page, "http://127.0.0.1:8000")
    assert shape is not None
    assert "77 requests" in shape.source
    wanted = {
        f"vllm:request_{name}_tokens_{part}"
        for name in ("prompt", "generation")
        for part in ("sum", "count")
    }
    sums = {
        line.split("{")[0]: float(line.split()[-1])
        for line in page.splitlines()
        if line.split("{")[0] in wanted
    }
    # the means of what the server served, from its own histograms
    prompt_mean = sums["vllm:request_prompt_tokens_sum"] / sums["vllm:request_prompt_tokens_count"]
    output_mean = (
        sums["vllm:request_generation_tokens_sum"] / sums["vllm:request_generation_tokens_count"]
    )
    assert shape.prompt.mean == pytest.approx(prompt_mean)
    assert shape.output.mean == pytest.approx(output_mean)
    # tools/vllm_cpu's load sent prompts of 16-128 tokens: the fitted law stays near them
    assert shape.prompt.lo >= 1 and shape.prompt.hi <= 256


def test_too_few_requests_give_no_shape() -> None:
    assert shape_from_page((FIXTURES / "after-restart.txt").read_text(), "u") is None
    assert shape_from_page((FIXTURES / "idle.txt").read_text(), "u") is None


def test_a_server_with_no_history_gets_the_default_shape(server: tuple[str, Completions]) -> None:
    url, seen = server  # its /metrics is a 404
    said: list[str] = []
    load = Load(url, 2, None, ScrapeOptions(), said.append)
    load.ensure_started()
    load.ensure_started()  # once only
    try:
        _wait(lambda: len(seen.bodies) >= 4)
    finally:
        load.stop()
    assert said == [
        "load: 2 closed-loop clients, prompts ~256 tokens, outputs ~128 "
        "(vtop's default: none served)"
    ]


@pytest.mark.parametrize("text", ["512", "0:12", "a:b", "12:", ":12", "-3:4"])
def test_a_bad_shape_is_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="PROMPT:OUTPUT"):
        parse_shape(text)


def test_a_given_shape_says_so() -> None:
    shape: LoadShape = parse_shape("512:128")
    assert shape.describe() == "prompts ~512 tokens, outputs ~128 (as given)"
