"""The scrape timeout does not shrink with the poll interval: a slow answer delays the next poll.

Every consumer starts a poll only once the last one has answered, so a server slower than the
interval cannot build a backlog; timing it out at a share of the interval only turned a slow
server into a failing one (`--interval 0.5` against a server answering in 0.5 s: "no answer
… within 0.4 s" at every poll). So the timeout is at least `MIN_TIMEOUT_S` whatever the
interval, longer with a long interval (at most 10 s), for the connect-time reads (/version,
/v1/models) as much as for /metrics, and still when `+`/`-` change the interval. Proved
against a real HTTP server that answers late, in-process and through the command line.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from vtop.model import Frame
from vtop.monitor import Monitor
from vtop.report.run import watch
from vtop.sources.base import retime
from vtop.sources.live import LiveSource
from vtop.sources.vllm import MIN_TIMEOUT_S, ScrapeOptions, VllmScraper, timeout_for
from vtop.ui.app import INTERVALS, VtopApp

ROOT = Path(__file__).resolve().parents[2]
PAGE = b"""vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
"""
SLOW_S = 0.6
"""The late server's delay: longer than a 0.5 s interval (and than 0.8 of it, the old timeout)."""


@pytest.mark.parametrize("interval", [0.05, 0.2, 0.5, *INTERVALS, 12.5, 3600.0])
def test_the_timeout_never_shrinks_below_the_floor(interval: float) -> None:
    timeout = ScrapeOptions.from_env(interval_s=interval, environ={}).timeout_s
    assert MIN_TIMEOUT_S <= timeout <= 10.0
    assert timeout == pytest.approx(min(10.0, max(MIN_TIMEOUT_S, 0.8 * interval)))
    assert timeout_for(interval) >= timeout_for(0.05)  # a shorter interval never takes time


def test_a_nonpositive_interval_has_no_timeout() -> None:
    with pytest.raises(ValueError, match="must be positive, got 0"):
        timeout_for(0.0)


async def test_a_server_slower_than_the_interval_is_read_not_failed() -> None:
    script = Script({"/metrics": Answer(PAGE, delay_s=SLOW_S)})
    with PageServer(script) as srv:
        source = LiveSource([srv.url], ScrapeOptions.from_env(interval_s=0.5, environ={}))
        try:
            first = (await source.poll()).scrapes[0]
            assert first.ok, first.error
            assert first.latency_s is not None and first.latency_s >= SLOW_S
            retime(source, 0.25)  # faster still: the timeout stays
            assert source.options.timeout_s == MIN_TIMEOUT_S
            second = (await source.poll()).scrapes[0]
            assert second.ok, second.error
            retime(source, 30.0)  # a long interval gives a slow server more time
            (state,) = source.endpoints.values()
            assert state.scraper.options.timeout_s == pytest.approx(10.0)
        finally:
            await source.aclose()


async def test_a_slow_answer_delays_the_next_poll_instead_of_stacking() -> None:
    """The report's poll loop at 0.5 s over a server answering in 0.6 s: every poll answers,
    and the server never has two of vtop's requests at once (each starts after the last)."""
    arrivals: list[float] = []

    def late() -> Answer:
        arrivals.append(time.monotonic())
        return Answer(PAGE, delay_s=SLOW_S)

    frames: list[Frame] = []
    with PageServer(Script({"/metrics": late})) as srv:
        source = LiveSource([srv.url], ScrapeOptions.from_env(interval_s=0.5, environ={}))
        try:
            polls = await watch(source, 0.5, frames.append, duration_s=2.0, min_polls=3)
        finally:
            await source.aclose()
    errors = [s.error for f in frames for s in f.scrapes if s.error]
    assert errors == [] and polls >= 3
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= SLOW_S * 0.95, gaps


async def test_a_poll_in_flight_past_the_duration_ends_the_watch() -> None:
    """A report ends on time whatever the server does: a poll still waiting `late_s` after
    the duration (here shorter than the request timeout) is dropped, not awaited."""
    frames: list[Frame] = []
    with PageServer(Script({"/metrics": Answer(PAGE, delay_s=4.0)})) as srv:
        source = LiveSource([srv.url], ScrapeOptions.from_env(interval_s=1.0, environ={}))
        began = time.monotonic()
        try:
            polls = await watch(source, 1.0, frames.append, duration_s=1.0, min_polls=2, late_s=0.5)
        finally:
            await source.aclose()
    took = time.monotonic() - began
    assert polls == 0 and frames == []
    assert 1.4 <= took < 3.0, took


async def test_the_connect_time_reads_get_the_same_timeout() -> None:
    late = Answer(b'{"version": "0.32.0"}', content_type="application/json", delay_s=SLOW_S)
    script = Script(
        {
            "/metrics": Answer(PAGE),
            "/version": late,
            "/v1/models": Answer(b'{"data": []}', delay_s=SLOW_S),
        }
    )
    with PageServer(script) as srv:
        async with VllmScraper(srv.url, ScrapeOptions.from_env(interval_s=0.5, environ={})) as s:
            started = time.perf_counter()
            info = await s.info()
            took = time.perf_counter() - started
    assert info.version == "0.32.0"
    assert took < 2 * SLOW_S, f"/version and /v1/models were not read at once: {took:.2f} s"


def test_once_at_half_a_second_reads_a_server_answering_in_more() -> None:
    """The walk-through's case, as a user runs it."""
    with PageServer(Script({"/metrics": Answer(PAGE, delay_s=SLOW_S)})) as srv:
        result = subprocess.run(
            [sys.executable, "-m", "vtop", "--url", srv.url, "--once", "--interval", "0.5"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    (ep,) = json.loads(result.stdout)["endpoints"]
    assert ep["status"] == "ok", ep
    assert result.stderr == ""


async def test_the_interval_keys_keep_the_timeout() -> None:
    with PageServer(Script({"/metrics": Answer(PAGE)})) as srv:
        source = LiveSource([srv.url], ScrapeOptions.from_env(interval_s=1.0, environ={}))
        (state,) = source.endpoints.values()
        app = VtopApp(source, Monitor(capacity=60), interval=1.0, autopoll=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("plus")
            assert app.interval == 0.5
            assert state.scraper.options.timeout_s == MIN_TIMEOUT_S
            await pilot.press("minus", "minus", "minus", "minus", "minus")
            assert app.interval == 30.0
            assert state.scraper.options.timeout_s == pytest.approx(10.0)
        await source.aclose()
