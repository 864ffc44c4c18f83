"""The scraper's own HTTP transport against a real HTTP/1.1 server that keeps connections open:
polls share one connection, a connection the server dropped is replaced without an error, and
what httpx's transport handled (chunked bodies, redirects, gzip, a broken answer) still is."""

from __future__ import annotations

import asyncio
import time

from tests.pageserver import Answer, PageServer, Script
from vtop.model import Scrape
from vtop.sources.vllm import ScrapeOptions, VllmScraper

PAGE = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
"""


def polls(url: str, n: int, *, pause_s: float = 0.0, timeout_s: float = 1.0) -> list[Scrape]:
    async def go() -> list[Scrape]:
        out = []
        async with VllmScraper(url, ScrapeOptions(timeout_s=timeout_s)) as s:
            for _ in range(n):
                out.append(await s.scrape())
                await asyncio.sleep(pause_s)
        return out

    return asyncio.run(go())


def running(scrape: Scrape) -> float | None:
    assert scrape.ok, scrape.error
    return next(v for k, v in scrape.scalars.items() if k.signal == "running")


def test_polls_share_one_kept_alive_connection() -> None:
    with PageServer(Script({"/metrics": Answer(PAGE)}), keep_alive_s=5) as srv:
        got = polls(srv.url, 20)
    assert [running(s) for s in got] == [7.0] * 20
    assert srv.script.connections == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error() -> None:
    # uvicorn, vLLM's server, closes a connection idle for 5 s: polls every 10 s meet this.
    with PageServer(Script({"/metrics": Answer(PAGE)}), keep_alive_s=0.1) as srv:
        got = polls(srv.url, 3, pause_s=0.8)  # room for a server thread that wakes late
    assert [running(s) for s in got] == [7.0] * 3
    assert srv.script.connections == 3


def test_a_reused_connection_dropped_as_the_request_arrives_is_retried_once() -> None:
    count = {"n": 0}

    def second_hangs_up() -> Answer:
        count["n"] += 1
        return Answer(hangup=True) if count["n"] == 2 else Answer(PAGE)

    with PageServer(Script({"/metrics": second_hangs_up}), keep_alive_s=5) as srv:
        got = polls(srv.url, 3)
    assert [running(s) for s in got] == [7.0] * 3
    assert count["n"] == 4  # the dropped request was asked again, on a new connection
    assert srv.script.connections == 2


def test_a_fresh_connection_dropped_without_an_answer_is_one_line() -> None:
    with PageServer(Script({"/metrics": Answer(hangup=True)}), keep_alive_s=5) as srv:
        (scrape,) = polls(srv.url, 1)
    assert scrape.error is not None
    assert scrape.error == (f"request to {srv.url}/metrics failed: "
                            "Server disconnected without sending a response.")  # fmt: skip


def test_chunked_and_gzipped_bodies_are_read_whole() -> None:
    script = Script({"/metrics": Answer(PAGE * 50, chunked=True, gzip=True)})
    with PageServer(script, keep_alive_s=5) as srv:
        got = polls(srv.url, 3)
    assert [s.size_bytes for s in got] == [len(PAGE * 50)] * 3
    assert srv.script.connections == 1


def test_a_redirect_is_followed_on_the_same_connection() -> None:
    # vLLM versions that mount prometheus_client's app answer /metrics with 307 to /metrics/.
    script = Script(
        {"/metrics": Answer(status=307, location="/metrics/"), "/metrics/": Answer(PAGE)}
    )
    with PageServer(script, keep_alive_s=5) as srv:
        got = polls(srv.url, 2)
    assert [running(s) for s in got] == [7.0] * 2
    assert [path for path, _ in srv.script.requests] == ["/metrics", "/metrics/"] * 2
    assert srv.script.connections == 1


def test_a_body_left_unread_closes_its_connection_and_the_next_poll_opens_another() -> None:
    big = Answer(PAGE, stream_bytes=3 * 1024 * 1024)  # over the 2 MiB cap: cut mid-body
    answers = iter([big, Answer(PAGE)])
    with PageServer(Script({"/metrics": lambda: next(answers)}), keep_alive_s=5) as srv:
        options = ScrapeOptions(timeout_s=2.0, max_bytes=2 * 1024 * 1024)

        async def go() -> list[Scrape]:
            async with VllmScraper(srv.url, options) as s:
                return [await s.scrape(), await s.scrape()]

        first, second = asyncio.run(go())
    assert first.error is not None and "larger than 2 MiB" in first.error
    assert running(second) == 7.0
    assert srv.script.connections == 2


def test_a_server_slow_to_answer_times_out_within_the_poll() -> None:
    with PageServer(Script({"/metrics": Answer(PAGE, delay_s=1.5)}), keep_alive_s=5) as srv:
        started = time.monotonic()
        (scrape,) = polls(srv.url, 1, timeout_s=0.3)
    assert scrape.error == f"no answer from {srv.url}/metrics within 0.3 s"
    assert time.monotonic() - started < 1.2
