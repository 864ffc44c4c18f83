"""The scrape timeout follows the poll interval, at start-up and when `+`/`-` change it.

A request that may outlast the interval makes the next poll wait; so the timeout is 0.8 of the
interval (at most 10 s) and never reaches it, for the connect-time reads (/version,
/v1/models) as much as for /metrics. Proved against a real HTTP server that answers late.
"""

from __future__ import annotations

import time

import pytest

from tests.pageserver import Answer, PageServer, Script
from vtop.monitor import Monitor
from vtop.sources.base import retime
from vtop.sources.live import LiveSource
from vtop.sources.vllm import ScrapeOptions, VllmScraper, timeout_for
from vtop.ui.app import INTERVALS, VtopApp

PAGE = b"""vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
"""
SLOW_S = 0.6
"""The late server's delay: inside a 1 s interval's timeout (0.8 s), outside a 0.5 s one's."""


@pytest.mark.parametrize("interval", [0.05, 0.2, 0.5, *INTERVALS, 12.5, 3600.0])
def test_the_timeout_is_always_below_the_interval(interval: float) -> None:
    timeout = ScrapeOptions.from_env(interval_s=interval, environ={}).timeout_s
    assert 0 < timeout < interval and timeout <= 10.0
    assert timeout == pytest.approx(min(10.0, 0.8 * interval))


def test_a_nonpositive_interval_has_no_timeout() -> None:
    with pytest.raises(ValueError, match="must be positive, got 0"):
        timeout_for(0.0)


async def test_a_new_interval_gives_a_new_timeout_against_a_late_server() -> None:
    script = Script({"/metrics": Answer(PAGE, delay_s=SLOW_S)})
    with PageServer(script) as srv:
        source = LiveSource([srv.url], ScrapeOptions.from_env(interval_s=1.0, environ={}))
        try:
            first = (await source.poll()).scrapes[0]
            assert first.ok, first.error
            retime(source, 0.5)
            assert source.options.timeout_s == pytest.approx(0.4)
            (state,) = source.endpoints.values()
            state.next_try = 0.0
            second = (await source.poll()).scrapes[0]
            assert second.error is not None and "within 0.4 s" in second.error
            assert second.latency_s is not None and second.latency_s < 0.5
            retime(source, 2.0)
            state.next_try = 0.0
            third = (await source.poll()).scrapes[0]
            assert third.ok, third.error
        finally:
            await source.aclose()


async def test_the_connect_time_reads_fit_in_the_interval() -> None:
    late = Answer(b'{"version": "0.32.0"}', content_type="application/json", delay_s=1.5)
    script = Script({"/metrics": Answer(PAGE), "/version": late,
                     "/v1/models": Answer(b'{"data": []}', delay_s=1.5)})  # fmt: skip
    with PageServer(script) as srv:
        async with VllmScraper(srv.url, ScrapeOptions.from_env(interval_s=0.5, environ={})) as s:
            started = time.perf_counter()
            info = await s.info()
            took = time.perf_counter() - started
    assert info.version is None and info.models == ()
    assert took < 0.5, f"/version and /v1/models took {took:.2f} s at a 0.5 s interval"


async def test_the_interval_keys_retime_the_live_source() -> None:
    with PageServer(Script({"/metrics": Answer(PAGE)})) as srv:
        source = LiveSource([srv.url], ScrapeOptions.from_env(interval_s=1.0, environ={}))
        (state,) = source.endpoints.values()
        app = VtopApp(source, Monitor(capacity=60), interval=1.0, autopoll=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("plus")
            assert app.interval == 0.5
            assert state.scraper.options.timeout_s == pytest.approx(0.4)
            await pilot.press("minus", "minus", "minus")
            assert app.interval == 5.0
            assert state.scraper.options.timeout_s == pytest.approx(4.0)
        await source.aclose()
