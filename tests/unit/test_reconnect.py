"""A server that goes away and comes back is read again within a second, however long it was away.

The reconnect back-off (1, 2, 4 … 30 s) spares a server that answers badly; a server that
refuses connections (stopped, restarting) costs nothing to try, so it is tried every second and
read as soon as it listens again, instead of up to 30 s later. Proved with a real HTTP server
on loopback, stopped and started again on the same port: with a hand-moved clock through a
long outage, and in real time through the report's poll loop.
"""

from __future__ import annotations

import asyncio
import time

from tests.pageserver import Answer, PageServer, Script
from vtop.model import Frame
from vtop.report.run import watch
from vtop.sources.live import LiveSource
from vtop.sources.vllm import ScrapeOptions

PAGE = b"""vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:generation_tokens_total{engine="0",model_name="qwen"} 100.0
"""


class Clock:
    """`time.monotonic` for `LiveSource`, moved by hand past its reconnect delays."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def metrics_requests(script: Script) -> int:
    return sum(path == "/metrics" for path, _ in script.requests)


async def test_a_restarted_server_is_read_a_second_after_a_long_outage() -> None:
    clock = Clock()
    server = PageServer(Script({"/metrics": Answer(PAGE)})).__enter__()
    port, url = server.port, server.url
    try:
        async with LiveSource([url], ScrapeOptions(timeout_s=2.0), clock=clock) as source:
            assert (await source.poll()).scrapes[0].ok
            server.stop()
            for attempt in range(1, 9):  # past the back-off's 30 s step
                scrape = (await source.poll()).scrapes[0]
                assert scrape.error is not None and scrape.error.endswith("connection refused")
                status = source.status(url)
                assert (status.state, status.attempt, status.retry_in_s) == (
                    "reconnecting",
                    attempt,
                    1.0,
                )
                assert status.text == f"reconnecting (attempt {attempt}, next in 1 s)"
                clock.now += 1.0
            back = Script({"/metrics": Answer(PAGE)})
            server = PageServer(back, port=port).__enter__()
            frame = await source.poll()
            assert frame.scrapes[0].ok, frame.scrapes[0].error
            assert [e.kind for e in frame.events] == ["reconnect"]
            assert metrics_requests(back) == 1 and source.status(url).text == "connected"
    finally:
        server.stop()


async def test_a_server_that_answers_badly_still_backs_off() -> None:
    """Up but failing (a 500, a timeout): each retry waits longer and asks nothing meanwhile."""
    clock = Clock()
    script = Script({"/metrics": Answer(b"Internal Server Error", status=500)})
    with PageServer(script) as srv:
        async with LiveSource([srv.url], ScrapeOptions(timeout_s=2.0), clock=clock) as source:
            for attempt, wait in ((1, 1), (2, 2), (3, 4), (4, 8)):
                asked = metrics_requests(script)
                scrape = (await source.poll()).scrapes[0]
                assert scrape.error == f"HTTP 500 Internal Server Error from {srv.url}/metrics"
                assert metrics_requests(script) == asked + 1
                assert (
                    source.status(srv.url).text
                    == f"reconnecting (attempt {attempt}, next in {wait} s)"
                )
                clock.now += wait - 0.5
                await source.poll()  # still backing off: nothing asked
                assert metrics_requests(script) == asked + 1
                clock.now += 0.5


async def test_in_real_time_the_restart_is_read_within_a_second() -> None:
    """The report's loop at 0.2 s; the server away for 4 s (the back-off would next try 7.5 s
    after the kill), then back on its port: read within a second and a poll of its return."""
    server = PageServer(Script({"/metrics": Answer(PAGE)})).__enter__()
    port, url = server.port, server.url
    frames: list[tuple[float, Frame]] = []
    restarted_at: list[float] = []
    stop = asyncio.Event()

    def take(frame: Frame) -> None:
        frames.append((time.monotonic(), frame))
        if restarted_at and frame.scrapes[0].ok:
            stop.set()

    async def outage() -> None:
        nonlocal server
        await asyncio.sleep(0.5)
        server.stop()
        await asyncio.sleep(4.0)
        server = PageServer(Script({"/metrics": Answer(PAGE)}), port=port).__enter__()
        restarted_at.append(time.monotonic())

    try:
        async with LiveSource([url], ScrapeOptions(timeout_s=2.0)) as source:
            away = asyncio.create_task(outage())
            await asyncio.wait_for(watch(source, 0.2, take, stop=stop), timeout=30)
            await away
    finally:
        server.stop()
    failed = [t for t, f in frames if not f.scrapes[0].ok]
    assert failed, "the outage was never seen"
    read_again = next(t for t, f in frames if t > restarted_at[0] and f.scrapes[0].ok)
    assert read_again - restarted_at[0] < 1.3, f"read {read_again - restarted_at[0]:.1f} s late"
