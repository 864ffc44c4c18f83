"""The server misbehaves: every fault is one clear line, history survives, and vtop recovers.

Issue 8 ("Hardening") lists what a vLLM server, or what stands in front of it, does to a
monitor in the field: it is not up yet, it is killed and restarted (counters reset), it answers
late or never finishes, a proxy answers 401/403/404/500 or an HTML login page, gzip that is
not gzip, a 100 MB body (its peak memory: test_peak_memory.py), bytes that are not HTTP. Each
is proven here on vtop's real path, against a real HTTP server on loopback that serves pages
captured from a real vLLM 0.32:

- in-process, `LiveSource` + `Monitor` (the store the screen, reports and rules read), with a
  hand-moved clock for the reconnect back-off only, so a test needs no sleeping: the message is
  exactly one printable line naming the URL, the polls made before the fault are still in the
  store, and data flows again once the fault ends;
- through the command line (`--report`, `--once`), where a script meets it: exit code 3
  (UNKNOWN) and the same line on stderr, never a traceback;
- on the dashboard (Textual Pilot over a live source), where a person meets it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hardening.localfaults import judged
from tests.pageserver import Answer, PageServer, Script
from vtop.model import SeriesKey
from vtop.monitor import Monitor
from vtop.sources.live import LiveSource
from vtop.sources.vllm import MIN_TIMEOUT_S, ScrapeOptions

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-0.32"
SERIES_PAGES = len(list((REAL / "kv-exhausted-series").glob("[0-9][0-9].txt")))
GEN = SeriesKey("generation_tokens", "vtop/engine", "0", "")
RUNNING = SeriesKey("running", "vtop/engine", "0", "")
SERIES_TOKENS = [
    9716.0,
    9921.0,
    10135.0,
    10353.0,
    10639.0,
    10969.0,
    11232.0,
    11393.0,
    11686.0,
    11948.0,
]
"""generation_tokens_total on the ten real pages, in order (the fixture's own numbers)."""
AFTER_RESTART_TOKENS = 523.0
Start = Callable[..., subprocess.Popen[str]]
"""The `vtop_process` fixture: `start(*args, env=None)` runs vtop in the background."""
BUSY = (REAL / "busy.txt").read_bytes()
NOISE = random.Random(8).randbytes(4096)
"""Random bytes (fixed seed): as a body, and instead of an HTTP answer."""


def one_line(message: str | None) -> str:
    """The message, asserted to be a single printable line: no newline, no escape, no
    traceback (what it says is compared by the caller)."""
    assert message is not None
    assert message.isprintable(), f"not one printable line: {message!r}"
    assert "Traceback" not in message
    return message


class Clock:
    """`time.monotonic` for `LiveSource`, moved by hand past its reconnect back-off."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Fault:
    name: str
    answer: Answer
    message: str
    """The exact line, `{where}` standing for the URL of /metrics."""
    timeout_s: float = 2.0
    """Generous where the timeout is not the fault: a loaded machine must not turn a 401 into
    a timeout."""


CLI_TIMEOUT = MIN_TIMEOUT_S
"""`--interval 1`: the command line's timeout, the floor (a short interval does not shorten it)."""

FAULTS = [
    Fault(
        "http-401",
        Answer(b"Unauthorized", status=401),
        "HTTP 401 Unauthorized from {where}: needs credentials: set VTOP_API_KEY or "
        "--header 'Authorization: …'",
    ),
    Fault(
        "slower-than-timeout",
        Answer(BUSY, delay_s=CLI_TIMEOUT + 1.0),
        "no answer from {where} within {timeout:g} s",
        timeout_s=0.3,
    ),
    Fault(
        "body-never-ends",
        Answer(endless=True),
        "no answer from {where} within {timeout:g} s",
        timeout_s=0.3,
    ),
    Fault(
        "http-403",
        Answer(b"Forbidden", status=403),
        "HTTP 403 Forbidden from {where}: credentials refused: check VTOP_API_KEY or the "
        "--header values",
    ),
    Fault(
        "http-404",
        Answer(b"Not Found", status=404),
        "HTTP 404 Not Found from {where}: no /metrics here: is the URL a vLLM server's "
        "base (http://host:8000)?",
    ),
    Fault(
        "http-500",
        Answer(b"Internal Server Error", status=500),
        "HTTP 500 Internal Server Error from {where}",
    ),
    Fault(
        "html-page",
        Answer(
            b"<!DOCTYPE html>\n<html><body><form>Sign in</form></body></html>",
            content_type="text/html; charset=utf-8",
        ),
        "{where} is not a metrics page: line 1: not the Prometheus text format (the page "
        "looks like HTML)",
    ),
    Fault(
        "gzip-that-is-not-gzip",
        Answer(BUSY, raw_encoding="gzip"),
        "{where} sent a body that does not decode (bad gzip?)",
    ),
    Fault(
        "100-mb-body",
        Answer(BUSY, stream_bytes=100_000_000),
        "response from {where} is larger than 16 MiB",
        timeout_s=5.0,
    ),
    Fault(
        "random-bytes-body",
        Answer(NOISE, content_type="application/octet-stream"),
        "{where} is not a metrics page: line 1: invalid metric name ",
    ),
    Fault(
        "random-bytes-not-http",
        Answer(raw=NOISE),
        "request to {where} failed: Server disconnected without sending a response.",
    ),
]


def expected(fault: Fault, url: str, timeout_s: float | None = None) -> str:
    where = f"{url}/metrics"
    return fault.message.format(where=where, timeout=timeout_s or fault.timeout_s)


def matches(message: str, fault: Fault, url: str, timeout_s: float | None = None) -> bool:
    """Exact, except random bytes, whose message quotes (escaped) what the line began with."""
    want = expected(fault, url, timeout_s)
    if fault.name == "random-bytes-body":
        return message.startswith(want) and len(message) < len(want) + 200
    return message == want


async def feed(monitor: Monitor, source: LiveSource) -> list[str]:
    """One poll into the monitor; the kinds of the events it carried or revealed."""
    return [e.kind for e in monitor.feed(await source.poll())]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_fault_is_one_line_keeps_history_and_recovers(
    fault: Fault, real_vllm: Callable[..., Script]
) -> None:
    script = real_vllm()
    good = script.routes["/metrics"]
    with PageServer(script) as srv:
        clock = Clock()
        options = ScrapeOptions(timeout_s=fault.timeout_s)
        async with LiveSource([srv.url], options, clock=clock) as source:
            monitor = Monitor(capacity=64)
            for _ in range(3):
                assert await feed(monitor, source) == []
            view = monitor.endpoints[srv.url]
            assert view.store.values(GEN) == SERIES_TOKENS[:3]

            script.routes["/metrics"] = fault.answer
            kinds = await feed(monitor, source)
            assert view.last is not None
            error = one_line(view.last.error)
            assert matches(error, fault, srv.url), error
            assert kinds == ["disconnect"]
            assert view.store.events[-1].message == error
            # While backing off, vtop asks nothing and the scrape keeps saying why.
            asked = len(srv.script.requests)
            assert await feed(monitor, source) == []
            assert len(srv.script.requests) == asked and view.last.error == error
            assert source.status(srv.url).text == "reconnecting (attempt 1, next in 1 s)"

            script.routes["/metrics"] = good
            clock.advance(1.0)
            assert await feed(monitor, source) == ["reconnect"]
            assert await feed(monitor, source) == []
            assert source.status(srv.url).text == "connected"

    store = view.store
    assert view.last.ok
    # The polls before the fault are intact, the outage is a gap (not zeros), data flows again.
    assert store.values(GEN) == [*SERIES_TOKENS[:3], None, None, *SERIES_TOKENS[3:5]]
    assert store.values("up") == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert store.values(RUNNING)[:3] == [8.0, 9.0, 8.0] and store.last(RUNNING) is not None
    rate = store.per_second(GEN)
    assert rate is not None and rate > 0
    assert view.server.version == "0.32.0"


def test_each_fault_is_one_line_in_the_report_on_stderr_and_in_once(vtop_process: Start) -> None:
    """`--report` and `--once` over a fleet with one endpoint per fault (a route each on one
    server; the 100 MB body has its own test, which also measures what was read): each
    endpoint's line is in the output, the first one is the one line on stderr, exit 3."""
    faults = [f for f in FAULTS if f.name != "100-mb-body"]
    with PageServer(Script({})) as srv:
        urls = []
        for fault in faults:
            srv.script.routes[f"/{fault.name}/metrics"] = fault.answer
            urls.append(f"{srv.url}/{fault.name}")
        fleet = [arg for url in urls for arg in ("--url", url)]
        report = vtop_process(*fleet, "--report", "--duration", "0.1", "--interval", "1")
        once = vtop_process(*fleet, "--once", "--interval", "1")
        out, err = report.communicate(timeout=60)
        once_out, once_err = once.communicate(timeout=60)
    assert report.returncode == 3 and once.returncode == 3, (err, once_err)
    first = expected(faults[0], urls[0], CLI_TIMEOUT)  # the 401, with its hint
    assert err == f"vtop: UNKNOWN: {first}\n"
    assert out.splitlines()[0] == f"vtop report: UNKNOWN ({first})"
    health = [line.strip() for line in out.splitlines() if "; last error: " in line]
    assert len(health) == len(faults)
    assert once_err == ""
    endpoints = json.loads(once_out)["endpoints"]
    assert [ep["url"] for ep in endpoints] == urls
    for fault, url, line, ep in zip(faults, urls, health, endpoints, strict=True):
        status, _, message = line.partition("; last error: ")
        assert status.startswith("unreachable: "), line
        assert matches(one_line(message), fault, url, CLI_TIMEOUT), (fault.name, message)
        assert ep["status"] == "error", ep
        assert matches(one_line(ep["error"]), fault, url, CLI_TIMEOUT), (fault.name, ep["error"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_refused_at_start_then_the_server_comes_up(
    real_vllm: Callable[..., Script],
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    clock = Clock()
    async with LiveSource([url], ScrapeOptions(timeout_s=2.0), clock=clock) as source:
        monitor = Monitor(capacity=64)
        assert await feed(monitor, source) == []  # never connected: nothing to disconnect
        view = monitor.endpoints[url]
        assert view.last is not None
        assert one_line(view.last.error) == (f"cannot connect to {url}/metrics: connection refused")
        assert source.status(url).text == "reconnecting (attempt 1, next in 1 s)"
        with PageServer(real_vllm(), port=port):
            clock.advance(1.0)
            assert await feed(monitor, source) == ["reconnect"]
            assert await feed(monitor, source) == []
    assert view.store.values("up") == [0.0, 1.0, 1.0]
    assert view.store.values(GEN) == [None, *SERIES_TOKENS[:2]]
    assert view.server.models == ("vtop/engine",) and view.server.max_model_len == 2048


async def test_killed_and_restarted_server_is_one_restart_and_no_negative_rate(
    real_vllm: Callable[..., Script],
) -> None:
    script = real_vllm()
    clock = Clock()
    server = PageServer(script).__enter__()
    port, url = server.port, server.url
    try:
        async with LiveSource([url], ScrapeOptions(timeout_s=2.0), clock=clock) as source:
            monitor = Monitor(capacity=64)
            for _ in range(SERIES_PAGES):
                assert await feed(monitor, source) == []
            view = monitor.endpoints[url]
            before = view.store.values(GEN)
            assert before == SERIES_TOKENS
            server.stop()  # killed
            assert await feed(monitor, source) == ["disconnect"]
            assert one_line(view.last.error if view.last else None) == (
                f"cannot connect to {url}/metrics: connection refused"
            )
            restarted = real_vllm([REAL / "after-restart.txt"])
            server = PageServer(restarted, port=port).__enter__()  # back, counters from 0
            clock.advance(1.0)
            kinds = await feed(monitor, source)
            assert kinds == ["reconnect", "restart"]
            assert await feed(monitor, source) == []
            # Coming back, vtop re-read what the server says of itself (a restart is usually
            # the user applying a recommendation).
            assert [p for p, _ in restarted.requests].count("/version") == 1
    finally:
        server.stop()
    store = view.store
    assert [e.kind for e in store.events] == ["disconnect", "reconnect", "restart"]
    assert len(store.restarts()) == 1
    adjusted = [v for v in store.values(GEN) if v is not None]
    assert adjusted[:SERIES_PAGES] == SERIES_TOKENS, "history from before the restart is kept"
    # Reset-adjusted: the count goes on from where it was, never down.
    assert adjusted[SERIES_PAGES:] == [SERIES_TOKENS[-1] + AFTER_RESTART_TOKENS] * 2
    assert all(b >= a for a, b in itertools.pairwise(adjusted))
    for window in (None, 1.0, 5.0, 60.0):
        rate = store.per_second(GEN, window)
        assert rate is None or rate >= 0, (window, rate)
    assert store.last(RUNNING) == 2.0  # the restarted server's page


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_report_across_a_kill_and_restart(
    vtop_process: Start, real_vllm: Callable[..., Script]
) -> None:
    """A live report over a server killed mid-run and restarted with its counters at 0: one
    restart, the outage and the return as events, every rate ≥ 0, the polls before kept."""
    first = PageServer(real_vllm()).__enter__()
    port, url = first.port, first.url
    second: PageServer | None = None
    try:
        proc = vtop_process(
            "--url", url, "--report", "--format", "json", "--duration", "4.5", "--interval", "0.5"
        )

        def metrics() -> int:
            return sum(p == "/metrics" for p, _ in first.script.requests)

        _wait_for(lambda: metrics() >= 3, 15, "three polls before the kill")
        first.stop()
        time.sleep(0.7)  # down for longer than an interval: at least one poll is refused
        second = PageServer(real_vllm([REAL / "after-restart.txt"]), port=port).__enter__()
        out, err = proc.communicate(timeout=30)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    doc = json.loads(out)
    assert err.count("\n") <= 1 and "Traceback" not in err, err
    (ep,) = doc["endpoints"]
    kinds = [e["kind"] for e in doc["events"]]
    # In this order (a loaded machine may add a timed-out poll and its reconnect around them).
    assert kinds.count("restart") == 1, doc["events"]
    kill = kinds.index("disconnect")
    assert kinds[kill:].index("reconnect") < kinds[kill:].index("restart"), doc["events"]
    disconnect = doc["events"][kill]["message"]
    assert one_line(disconnect) == f"cannot connect to {url}/metrics: connection refused"
    assert ep["restarts"] == 1 and ep["failed_polls"] >= 1
    assert ep["polls"] - ep["failed_polls"] >= 4
    assert ep["status"] == "partial"
    assert ep["signals"]["running"]["last"] == 2.0  # the restarted server's page
    assert ep["signals"]["running"]["max"] >= 8.0  # and the polls before the kill
    for name in ("generation_tokens_per_s", "preemptions_per_s", "prompt_tokens_per_s"):
        for stat, value in ep["signals"][name].items():
            assert value is None or not isinstance(value, float) or value >= 0, (name, stat)
    rates = [v for v in doc["timeline"]["generation_tokens_per_s"] if v is not None]
    assert rates and min(rates) >= 0
    assert ep["server"]["version"] == "0.32.0"


def test_report_across_a_server_that_comes_up_late(
    vtop_process: Start, real_vllm: Callable[..., Script]
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = vtop_process(
        "--url", url, "--report", "--format", "json", "--duration", "3.2", "--interval", "0.2"
    )
    # vtop's first poll finds no server: it is cut off at once (vtop may take seconds to start
    # on a busy machine, so its attempt is awaited, not guessed); the next comes 1 s later.
    with socket.create_server(("127.0.0.1", port)) as early:
        early.settimeout(30)
        conn, _ = early.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    with PageServer(real_vllm(), port=port):
        out, err = proc.communicate(timeout=30)
    doc = json.loads(out)
    (ep,) = doc["endpoints"]
    assert "Traceback" not in err and err.count("\n") <= 1, err
    assert doc["events"][0]["kind"] == "reconnect"  # never connected before
    assert ep["failed_polls"] >= 1 and ep["polls"] - ep["failed_polls"] >= 3
    assert ep["status"] == "partial"
    assert ep["signals"]["running"]["max"] >= 8.0
    # read, not unreachable: a verdict, or (3 s of a server whose KV pool is full) none yet
    assert doc["exit_code"] == proc.returncode and judged(proc.returncode, doc["reason"])


async def test_dashboard_says_what_and_where_in_one_line_then_recovers(
    real_vllm: Callable[..., Script],
) -> None:
    """The TUI as the CLI builds it, over a live source: a proxy starts answering 401, the
    triage panel says so in one line naming the URL, the header says reconnecting, the charts
    keep what they had; the proxy lets vtop through again and the screen is live again."""
    from vtop.ui.app import VtopApp

    script = real_vllm()
    good = script.routes["/metrics"]
    with PageServer(script) as srv:
        source = LiveSource([srv.url], ScrapeOptions(timeout_s=2.0))
        monitor = Monitor(capacity=600)
        app = VtopApp(source, monitor, interval=0.2, self_cpu=lambda: 0.4)
        async with app.run_test(size=(80, 24)) as pilot:

            async def until(condition: Callable[[], bool], what: str) -> None:
                deadline = time.monotonic() + 10
                while not condition():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await pilot.pause(0.05)

            await until(lambda: monitor.frames >= 3, "three polls")
            polls_before = monitor.frames
            script.routes["/metrics"] = Answer(b"Unauthorized", status=401)
            await until(lambda: app.header.text("status").startswith("↻"), "the outage")
            first, why = app.triage.lines[:2]
            assert (first.kind, why.kind) == ("error", "error")
            assert first.text == f"HTTP 401 Unauthorized from {srv.url}/metrics"
            assert why.text == "needs credentials: set VTOP_API_KEY or --header 'Authorization: …'"
            # The panel grows to hold the DOWN lines at its next layout pass, a frame after the
            # header turned: a loaded machine can let the test look in between.
            await until(lambda: app.triage.text("l0").startswith(" DOWN"), "the panel laid out")
            shown = app.triage.text("l0") + "\n" + app.triage.text("l1")
            assert shown == f" DOWN {first.text}\n      {why.text}"  # whole, even at 80 columns
            assert app.header.text("status") == "↻ reconnecting (attempt 1, next in 1 s)"
            assert app.grid.text("running.value").startswith("– /")  # unknown, not 0
            assert (
                app.monitor.endpoints[srv.url].store.values(GEN)[:polls_before]
                == (SERIES_TOKENS[:polls_before])
            )
            script.routes["/metrics"] = good
            await until(lambda: app.header.text("status") == "● connected", "the return")
            await until(lambda: app.triage.lines[0].kind != "error", "the error line to go")
            assert app.grid.text("running.value")[0].isdigit()
            assert app.is_running
    events = [e.kind for e in monitor.endpoints[srv.url].store.events]
    assert events == ["disconnect", "reconnect"]


def test_a_poll_in_flight_when_the_server_dies_is_one_line() -> None:
    """The server is killed while answering: the poll in flight fails with one line."""
    hold = threading.Event()

    def page() -> Answer:
        hold.wait(5)
        return Answer(raw=b"")  # the process died: the connection closes without an answer

    with PageServer(Script({"/metrics": page})) as srv:

        async def poll() -> str | None:
            async with LiveSource([srv.url], ScrapeOptions(timeout_s=2.0)) as source:
                task = asyncio.ensure_future(source.poll())
                await asyncio.sleep(0.1)
                hold.set()
                return (await task).scrapes[0].error

        error = asyncio.run(poll())
    assert one_line(error) == (
        f"request to {srv.url}/metrics failed: Server disconnected without sending a response."
    )
