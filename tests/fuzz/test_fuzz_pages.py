"""Fuzzing what a vLLM server answers: /metrics pages and HTTP, served by a real loopback server.

The scraper, the page reader and the rules read whatever a server sends, so each example here
is a real vLLM page (tests/fixtures, captured from vLLM 0.32 and its older dialects) broken
the ways a stranger's server can break it: lines cut, duplicated, swapped or replaced by
hostile ones (escapes, values that are no number, labels no parser expects, binary), and the
HTTP around it (a status, a redirect anywhere, a Content-Encoding that lies, chunking, bytes
that are not HTTP). Asserted for every example: the scrape returns (it never raises) within a
bound, a failure is one line, the monitor and its rules take the result, and through the real
`python -m vtop` the exit code is 0, 1, 2 or 3 with no traceback, within a minute and 512
MiB (tests/boundedrun.py).

Bounded: 200 in-process examples (VTOP_FUZZ_EXAMPLES sets more, for a long hunt) and three
whole-program runs, well under a minute together; Hypothesis draws new ones each run and names
the seed of any that fails (`--hypothesis-seed=N` replays it).
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.boundedrun import Ran, run_vtop
from tests.pageserver import Answer, PageServer, Script
from vtop.model import Frame, GpuStatus
from vtop.monitor import Monitor
from vtop.sources.vllm import ScrapeOptions, VllmScraper

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "metrics"
PAGES = [p.read_bytes() for p in sorted(FIXTURES.glob("*/*.txt"))]
EXAMPLES = int(os.environ.get("VTOP_FUZZ_EXAMPLES", "200"))
PROGRAM_RUNS = 3
PHASES = (Phase.explicit, Phase.generate)
"""No shrinking: a failure is reported as drawn (with its seed), within the bound, instead of
minutes spent making it smaller."""
SCRAPE_BOUND_S = 10.0
"""An example's scrape, timeout included (2 s here), must end well within this."""
PROGRAM_BOUND_S = 60.0
PROGRAM_MEMORY_MIB = 512
"""A whole-program run's wall time and peak RSS at most (a report here takes about 2 s and
80 MiB; the 180 MB backfill answer of issue 26 took 2.5 GB)."""
PROCESS_MEMORY_MIB = 1536
"""The test process's own peak at most: the in-process examples hold no answer past its cap."""


def within_memory() -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert peak < PROCESS_MEMORY_MIB, f"the test process peaked at {peak:.0f} MiB"


HOSTILE_LINES = [
    b'vllm:num_requests_running{engine="0",model_name="m"} NaN',
    b'vllm:num_requests_running{engine="0",model_name="m"} +Inf',
    b'vllm:num_requests_running{engine="0",model_name="m"} 1e309',
    b'vllm:num_requests_running{engine="0",model_name="m"} -0',
    b'vllm:num_requests_running{engine="0",model_name="m"} 0x1p3',
    b'vllm:num_requests_running{engine="0",model_name="m"} 1_000',
    b'vllm:num_requests_waiting{engine="0",model_name="\x1b]52;c;SGk=\x07\x1b[2J"} 3',
    b'vllm:num_requests_waiting{engine="0",model_name="\\"} 3',
    b'vllm:num_requests_waiting{engine="0",model_name="a\\nb\\\\"} 3',
    b'vllm:num_requests_waiting{engine="0",,model_name="m"} 3',
    b'vllm:num_requests_waiting{engine="0" model_name="m"} 3',
    b"vllm:num_requests_waiting{engine=0} 3",
    b'vllm:num_requests_waiting{engine="0"',
    b"vllm:num_requests_waiting 3 1700000000000 extra",
    b'vllm:e2e_request_latency_seconds_bucket{le="abc",engine="0",model_name="m"} 4',
    b'vllm:e2e_request_latency_seconds_bucket{le="+Inf",engine="0",model_name="m"} -4',
    b'vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 1e18',
    b'vllm:cache_config_info{block_size="-1",num_gpu_blocks="1e99",engine="0"} 1',
    b'vllm:cache_config_info{block_size="\xff\xfe",gpu_memory_utilization="nan"} 1',
    b"# TYPE vllm:num_requests_running histogram",
    b"# HELP vllm:num_requests_running \x1b[31m red \xe2\x80\xae",
    b"<html><body>not metrics</body></html>",
    b"\x00\x01\x02\xff" * 8,
    b"x" * 70_000,
    b'vllm:num_requests_running{engine="0",model_name="' + b"m" * 5000 + b'"} 1',
    b"# EOF",
]
STATUSES = [200] * 6 + [204, 301, 302, 307, 308, 400, 401, 403, 404, 429, 500, 502, 503]
LOCATIONS = [
    "/metrics",
    "/other",
    "",
    "//",
    "file:///etc/passwd",
    "javascript:alert(1)",
    "http://a..b/metrics",
    "http://[::1/",
    "http://127.0.0.1:1/",
    "ftp://x/",
    "http:///metrics",
    "\x1b[2J",
    "http://%zz/",
]


@st.composite
def pages(draw: st.DrawFn) -> bytes:
    """A real page with a few edits: lines replaced, inserted, duplicated, cut, bytes flipped."""
    lines = draw(st.sampled_from(PAGES)).split(b"\n")
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        edit = draw(st.sampled_from(["replace", "insert", "repeat", "cut", "flip", "drop", "raw"]))
        if edit == "replace":
            lines[at] = draw(st.sampled_from(HOSTILE_LINES))
        elif edit == "insert":
            lines.insert(at, draw(st.sampled_from(HOSTILE_LINES)))
        elif edit == "repeat" and lines:
            lines[at : at + 1] = [lines[at]] * draw(st.integers(2, 2000))
        elif edit == "cut" and lines and lines[at]:
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at]) - 1))]
        elif edit == "flip" and lines and lines[at]:
            i = draw(st.integers(0, len(lines[at]) - 1))
            lines[at] = lines[at][:i] + bytes([draw(st.integers(0, 255))]) + lines[at][i + 1 :]
        elif edit == "drop" and lines:
            del lines[at]
        elif edit == "raw":
            lines.insert(at, draw(st.binary(max_size=200)))
    return b"\n".join(lines)


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    """A page inside an HTTP answer that may itself be broken."""
    body = draw(pages())
    kind = draw(
        st.sampled_from(
            ["plain"] * 6 + ["gzip", "lying-gzip", "chunked", "status", "redirect", "raw", "hangup"]
        )
    )
    if kind == "gzip":
        return Answer(body, gzip=True)
    if kind == "lying-gzip":
        return Answer(body, raw_encoding=draw(st.sampled_from(["gzip", "br", "deflate", "x"])))
    if kind == "chunked":
        return Answer(body, chunked=True)
    if kind == "status":
        return Answer(body, status=draw(st.sampled_from(STATUSES)))
    if kind == "redirect":
        status = draw(st.sampled_from([301, 302, 303, 307, 308]))
        return Answer(body, status=status, location=draw(st.sampled_from(LOCATIONS)))
    if kind == "raw":
        head = draw(
            st.sampled_from(
                [
                    b"HTTP/1.1 200 OK\r\n",
                    b"HTTP/1.1 999 \r\n",
                    b"",
                    b"HTTP/1.0 200\r\nContent-Length: -1\r\n\r\n",
                ]
            )
        )
        return Answer(raw=head + draw(st.binary(max_size=300)))
    if kind == "hangup":
        return Answer(hangup=True)
    return Answer(body)


def scrape_and_judge(url: str, monitor: Monitor) -> None:
    async def go() -> None:
        async with VllmScraper(url, ScrapeOptions(timeout_s=2.0)) as scraper:
            started = time.monotonic()
            scrape = await asyncio.wait_for(scraper.scrape(), SCRAPE_BOUND_S)
            assert time.monotonic() - started < SCRAPE_BOUND_S
            if scrape.error is not None:
                assert "\n" not in scrape.error and scrape.error.strip(), repr(scrape.error)
            else:
                await asyncio.wait_for(scraper.info(), SCRAPE_BOUND_S)
        monitor.feed(Frame(t=scrape.t, scrapes=(scrape,), gpu=GpuStatus(unavailable="fuzz")))

    asyncio.run(go())


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(answers=st.lists(answers(), min_size=1, max_size=3))
def test_a_broken_page_or_answer_is_one_line_or_read(answers: list[Answer]) -> None:
    srv, monitor = _shared()
    srv.script.routes["/other"] = answers[0]
    for answer in answers:  # a few polls in a row: the reader keeps state between them
        srv.script.routes["/metrics"] = answer
        scrape_and_judge(srv.url, monitor)
    within_memory()


_SHARED: list[tuple[PageServer, Monitor]] = []


def _shared() -> tuple[PageServer, Monitor]:
    """One server and one monitor for every example (a monitor loads the rules: 0.2 s), as a
    real monitor sees one server's answers change poll after poll."""
    if not _SHARED:
        script = Script({"/version": Answer(b'{"version": "0.32.0"}'), "/v1/models": Answer(b"{}")})
        srv = PageServer(script).__enter__()
        _SHARED.append((srv, Monitor()))
    return _SHARED[0]


def teardown_module() -> None:
    for srv, _ in _SHARED:
        srv.stop()


def vtop(*args: str) -> Ran:
    ran = run_vtop(*args, timeout_s=PROGRAM_BOUND_S)
    assert not ran.killed, f"vtop {' '.join(args)} ran past {PROGRAM_BOUND_S:.0f} s"
    assert ran.peak_rss_mib < PROGRAM_MEMORY_MIB, f"vtop peaked at {ran.peak_rss_mib:.0f} MiB"
    return ran


@settings(
    max_examples=PROGRAM_RUNS,
    deadline=None,
    database=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(answer=answers(), report=st.booleans())
def test_the_program_ends_with_a_verdict_code_and_no_traceback(
    answer: Answer, report: bool
) -> None:
    with PageServer(Script({"/metrics": answer})) as srv:
        mode = ["--report", "--duration", "1", "--interval", "0.5"] if report else ["--once"]
        result = vtop("--url", srv.url, *mode)
    assert result.returncode in (0, 1, 2, 3), result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
