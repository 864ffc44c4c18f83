"""`vtop --prometheus`: a real Prometheus server scraping real HTTP pages, read through its API.

Everything here is real except the GPU: the Prometheus binary (Debian package), pages served
on loopback (a captured vLLM 0.32 page, a data-parallel page made from it, simulated servers),
and a dcgm-exporter page written after dcgm-exporter 3.x's default counters and format (there
is no GPU here to capture one from). History is written into Prometheus's TSDB with promtool
beforehand, so an hour of the past costs seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from tests.prom import (
    MISSING,
    PrometheusServer,
    Scraped,
    create_blocks,
    free_port,
    history_openmetrics,
    twin_scrapes,
)
from vtop.model import ALL, Frame, Scrape, SeriesKey
from vtop.monitor import Monitor
from vtop.signals.extract import PageReader
from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin
from vtop.sources.prometheus import PrometheusSource, backfill_step
from vtop.sources.status import CONNECTED, ConnectionStatus
from vtop.sources.vllm import ScrapeOptions

if MISSING:
    if os.environ.get("VTOP_REQUIRE_PROMETHEUS"):
        raise RuntimeError(MISSING)
    pytest.skip(MISSING, allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "tests/sim/fixtures/vllm-0.32-busy.txt").read_text()
DCGM = (ROOT / "tests/fixtures/prometheus/dcgm-exporter.txt").read_text()


def data_parallel(page: str) -> str:
    """The page as a two-engine (data-parallel) server shows it."""
    out = []
    for line in page.splitlines():
        out.append(line)
        if 'engine="0"' in line and not line.startswith("#"):
            out.append(line.replace('engine="0"', 'engine="1"'))
    return "\n".join(out) + "\n"


def poll_until(
    src: PrometheusSource, done: Callable[[list[Scrape]], bool], timeout_s: float = 20.0
) -> list[Scrape]:
    """Poll every 0.25 s until `done(scrapes so far)`; returns every scrape seen."""

    polls = 0

    async def run() -> list[Scrape]:
        nonlocal polls
        seen: list[Scrape] = []
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                seen.extend((await src.poll()).scrapes)
                if done(seen):
                    break
                await asyncio.sleep(0.25)
        finally:
            await src.aclose()
        return seen

    return asyncio.run(run())


@pytest.fixture(scope="module")
def static_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Prometheus scraping a real vLLM page, a data-parallel one, and a dcgm-exporter page."""
    dp = data_parallel(PAGE)
    one = PageServer(Script({"/metrics": Answer(PAGE.encode())}))
    two = PageServer(Script({"/metrics": Answer(dp.encode())}))
    gpu = PageServer(Script({"/metrics": Answer(DCGM.encode())}))
    with one, two, gpu:
        inst = {u.url: u.url.removeprefix("http://") for u in (one, two, gpu)}
        jobs = {"vllm": [inst[one.url], inst[two.url]], "dcgm": [inst[gpu.url]]}
        with PrometheusServer.start(tmp_path_factory.mktemp("prom"), jobs=jobs) as prom:
            prom.wait_for(lambda: len(prom.query("up == 1")) == 3, 20)
            yield {"prom": prom.url, "one": inst[one.url], "two": inst[two.url], "dp": dp}


def test_a_scrape_read_through_prometheus_is_the_scrape_of_the_page(
    static_fleet: dict[str, str],
) -> None:
    src = PrometheusSource(static_fleet["prom"], backfill_s=0)
    names = {static_fleet["one"], static_fleet["two"]}
    scrapes = poll_until(src, lambda seen: {s.endpoint for s in seen} >= names)
    by_name = {s.endpoint: s for s in scrapes}
    for name, page in ((static_fleet["one"], PAGE), (static_fleet["two"], static_fleet["dp"])):
        got = by_name[name]
        # the node's GPUs (same host as the vLLM target) join its page, as NVML would locally
        want = PageReader().read(page + DCGM, endpoint=name, t=got.t)
        assert got.ok, got.error
        assert dict(got.scalars) == dict(want.scalars)
        assert dict(got.histograms) == dict(want.histograms)
        assert dict(got.info) == dict(want.info)
        assert got.latency_s is not None and 0 < got.latency_s < 1  # scrape_duration_seconds
    two = by_name[static_fleet["two"]].scalars
    assert (
        two[SeriesKey("running", "vtop/engine", "1")]
        == two[SeriesKey("running", "vtop/engine", "0")]
    )
    # remote GPUs from dcgm-exporter, per GPU, in the catalog's units
    assert two[SeriesKey("gpu_util", "", "", "0")] == 97
    assert two[SeriesKey("gpu_mem_used", "", "", "1")] == 3900 * 1024 * 1024
    assert two[SeriesKey("gpu_power", "", "", "0")] == pytest.approx(287.349)


def test_knobs_come_from_the_page_the_flags_and_the_gpu_size(static_fleet: dict[str, str]) -> None:
    from vtop.sources.discovery import flag_knobs

    one = static_fleet["one"]
    src = PrometheusSource(
        static_fleet["prom"], backfill_s=0, instance_flags={one: flag_knobs(64, None)}
    )
    scrapes = poll_until(src, lambda seen: len({s.endpoint for s in seen}) == 2)
    knobs = {s.endpoint: s.knobs for s in scrapes if s.knobs}
    assert knobs[one]["max_num_seqs"].value == 64
    assert knobs[one]["max_num_seqs"].provenance == "flag"
    other = knobs[static_fleet["two"]]
    assert other["max_num_seqs"].provenance == "default"
    assert other["num_gpu_blocks"].provenance == "metrics"  # vllm:cache_config_info
    # 24 GB from dcgm-exporter (FB_USED + FB_FREE): the defaults for GPUs under 70 GiB
    assert "under 70 GiB" in other["max_num_seqs"].detail


def test_match_chooses_the_instances(static_fleet: dict[str, str]) -> None:
    one = static_fleet["one"]
    src = PrometheusSource(static_fleet["prom"], backfill_s=0, match=(f'instance="{one}"',))
    scrapes = poll_until(src, lambda seen: len(seen) >= 3)
    assert {s.endpoint for s in scrapes} == {one}


# -- history ----------------------------------------------------------------------------------

HISTORY_S = 12 * 60.0
SCRAPE_S = 5.0
SCENARIOS = {
    "127.0.0.1:18101": "memory-ceiling",
    "127.0.0.1:18102": "budget-too-small",
    "127.0.0.1:18103": "healthy",
}


@dataclass(frozen=True)
class History:
    prom: str
    """The URL of the Prometheus that holds it."""
    pages: dict[tuple[str, str], list[Scraped]]
    """Each (job, instance)'s pages, as Prometheus scraped them."""
    end: float
    """When the history ends (wall time)."""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """Prometheus holding 12 minutes of three simulated servers, scraped every 5 s, and
    scraping nothing now (their history is all there is)."""
    tmp = tmp_path_factory.mktemp("history")
    end = time.time() - 2.0
    pages = {
        ("vllm", inst): list(
            twin_scrapes(sc, seed=i, start=end - HISTORY_S, end=end, step_s=SCRAPE_S)
        )
        for i, (inst, sc) in enumerate(SCENARIOS.items())
    }
    om = tmp / "history.om"
    history_openmetrics(pages, om)
    create_blocks(om, tmp / "data")
    with PrometheusServer.start(tmp, data=tmp / "data") as prom:
        yield History(prom.url, pages, end)


def test_backfill_reads_the_history_scrape_for_scrape(history: History) -> None:
    src = PrometheusSource(history.prom, backfill_s=15 * 60)
    frame = asyncio.run(_first(src))
    assert [s.t for s in frame.scrapes] == sorted(s.t for s in frame.scrapes)
    step = backfill_step(15 * 60)
    pages = history.pages
    monitor = Monitor()
    monitor.feed(frame)
    for inst in SCENARIOS:
        store = monitor.endpoints[inst].store
        # every 15 s step holds one of the 5 s scrapes: about 12 min / 15 s of them
        assert abs(len(store) - HISTORY_S / step) <= 2
        by_t = {round(p.t, 3): p.page for p in pages[("vllm", inst)]}
        for t in list(store.times())[:: len(store) // 6]:
            want = PageReader().read(by_t[round(t, 3)], endpoint=inst, t=t)
            ours = [s for s in frame.scrapes if s.endpoint == inst and s.t == t]
            assert len(ours) == 1 and dict(ours[0].scalars) == dict(want.scalars)
            assert dict(ours[0].histograms) == dict(want.histograms)
        notes = [e.message for e in frame.events if e.endpoint == inst and e.kind == "note"]
        assert notes and "history from Prometheus" in notes[0]
    kv = monitor.endpoints["127.0.0.1:18101"].store.quantile(0.5, "kv_usage", 300)
    assert kv is not None and kv > 0.9  # the memory-ceiling server's pool is full
    queue = monitor.endpoints["127.0.0.1:18102"].store.avg("waiting", 300)
    assert queue is not None and queue > 10  # requests wait behind max_num_seqs 16
    # the first frame already carries the rules' verdict over the history
    firing = {f.rule for f in monitor.endpoints["127.0.0.1:18101"].findings if f.state == "firing"}
    assert "memory-ceiling" in firing


async def _first(src: PrometheusSource) -> Frame:
    async with src:
        return await src.poll()


def test_history_is_a_frame_per_step_and_then_poll_goes_on(history: History) -> None:
    async def run() -> tuple[list[Frame], Frame]:
        async with PrometheusSource(history.prom, backfill_s=15 * 60) as src:
            return await src.history(), await src.poll()

    frames, after = asyncio.run(run())
    step = backfill_step(15 * 60)
    assert abs(len(frames) - HISTORY_S / step) <= 3
    for frame in frames[:-1]:
        assert {s.endpoint for s in frame.scrapes} == set(SCENARIOS)  # one scrape each
    times = [f.t for f in frames]
    assert times == sorted(times) and times[-1] - times[0] > HISTORY_S - 60
    assert sum(e.kind == "note" for e in frames[0].events) == len(SCENARIOS)
    assert after.scrapes == ()  # nothing newer: the history is all there is


def test_a_report_over_prometheus_covers_the_past(history: History) -> None:
    url = history.prom
    result = vtop(
        "--prometheus", url, "--report", "--duration", "2", "--format", "json", "--interval", "0.5"
    )
    assert result.returncode in (0, 1, 2), result.stderr
    doc = json.loads(result.stdout)
    assert doc["source"]["name"] == f"Prometheus {url}"
    assert doc["window"]["duration_s"] > HISTORY_S - 60  # the past 12 minutes, not 2 s
    polls = {e["url"]: e["polls"] for e in doc["endpoints"]}
    assert set(polls) == set(SCENARIOS)
    assert all(n >= HISTORY_S / backfill_step(3600) - 3 for n in polls.values())
    kv = {e["url"]: e["signals"]["kv_usage"]["avg"] for e in doc["endpoints"]}
    assert kv["127.0.0.1:18101"] > 0.9  # memory-ceiling's pool, over the past
    # the rules stepped through the past: the finding began firing minutes before vtop started
    found = {(f["endpoint"], f["rule"]): f for f in doc["findings"]}
    wall = found[("127.0.0.1:18101", "memory-ceiling")]
    assert wall["first_t"] < history.end - 120
    assert result.returncode == 2  # it is critical: preempting more than once a second
    assert not any(ep == "127.0.0.1:18103" for ep, _ in found)  # the healthy one


async def test_the_dashboard_over_prometheus_has_the_fleet_and_the_past(
    history: History,
) -> None:
    """The TUI as `vtop --prometheus URL` builds it: a row per instance, connected, the
    verdicts of the past hour on the first screen."""
    from vtop.ui.app import VtopApp

    monitor = Monitor(capacity=3600)
    app = VtopApp(PrometheusSource(history.prom, backfill_s=15 * 60), monitor, interval=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            if len(app.endpoint_list.rows) == len(SCENARIOS):
                break
        rows = {r.name: r for r in app.endpoint_list.rows}
        assert sorted(rows) == sorted(SCENARIOS)
        assert all(r.up for r in rows.values()), [r.verdict for r in rows.values()]
        assert rows["127.0.0.1:18101"].verdict == "CRIT KV cache is the wall"  # from the past
        assert rows["127.0.0.1:18103"].verdict == "OK"
        assert len(monitor.endpoints["127.0.0.1:18101"].store) > 30  # charts have the past


@pytest.fixture(scope="module")
def kv_full_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Prometheus holding 3 minutes of a KV-full simulated server scraped every second, and
    scraping nothing now."""
    tmp = tmp_path_factory.mktemp("kv-full")
    end = time.time() - 2.0
    pages = {
        ("vllm", "127.0.0.1:18111"): list(
            twin_scrapes("memory-ceiling", seed=3, start=end - 180.0, end=end, step_s=1.0)
        )
    }
    om = tmp / "history.om"
    history_openmetrics(pages, om)
    create_blocks(om, tmp / "data")
    with PrometheusServer.start(tmp, data=tmp / "data") as prom:
        yield prom.url


def test_a_short_report_over_prometheus_judges_on_its_history(kv_full_history: str) -> None:
    # The backfill comes at a 15 s step, 12 points for 3 minutes: evidence is counted in the
    # seconds it covers, not in polls, so the rules reach their verdict inside the history
    # and a 10 s report has it.
    result = vtop(
        "--prometheus", kv_full_history, "--report", "--duration", "10s", "--format", "json"
    )
    doc = json.loads(result.stdout)
    assert doc["status"] in ("WARNING", "CRITICAL"), (doc["status"], doc["reason"])
    assert result.returncode == doc["exit_code"], result.stderr
    counted = [f for f in doc["findings"] if f["counts"]]
    assert counted and counted[0]["rule"] == "memory-ceiling", doc["reason"]
    assert doc["window"]["duration_s"] > 150  # the history, not the 10 s


def test_no_backfill_reads_only_the_latest(history: History) -> None:
    src = PrometheusSource(history.prom, backfill_s=0)
    frame = asyncio.run(_first(src))
    assert sorted(s.endpoint for s in frame.scrapes) == sorted(SCENARIOS)
    assert src.queries == 1


# -- live -------------------------------------------------------------------------------------


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[PrometheusServer, SimServer, subprocess.Popen[str]]]:
    """Prometheus scraping a simulated server in-process and one in a `vtop sim` process."""
    twin = Twin("memory-ceiling", seed=1)
    twin.warm_up()  # before serving: the server's clock thread advances the twin from then on
    sim = serve(twin)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtop", "sim", "--scenario", "healthy", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "vtop sim: serving scenario 'healthy'" in proc.stdout.readline()
        targets = [f"127.0.0.1:{sim.port}", f"127.0.0.1:{port}"]
        with PrometheusServer.start(tmp_path, jobs={"vllm": targets}) as prom:
            prom.wait_for(lambda: len(prom.query("up == 1")) == 2, 20)
            yield prom, sim, proc
    finally:
        sim.close()
        proc.kill()
        proc.wait(timeout=10)


def test_live_polls_give_one_scrape_per_prometheus_scrape_and_notice_a_target_down(
    live: tuple[PrometheusServer, SimServer, subprocess.Popen[str]],
) -> None:
    prom, sim, proc = live
    src = PrometheusSource(prom.url, backfill_s=60, interval_s=0.25)
    up = f"127.0.0.1:{sim.port}"
    down = next(i for i in src_instances(prom) if i != up)

    polls = 0

    async def run() -> list[Scrape]:
        nonlocal polls
        seen: list[Scrape] = []
        deadline = time.monotonic() + 60  # a loaded machine slows Prometheus, not the test
        async with src:
            for i in itertools.count():
                if i == 20:
                    proc.kill()  # the server dies; Prometheus's next scrape fails
                seen.extend((await src.poll()).scrapes)
                polls += 1
                live_scrapes = sum(x.endpoint == up and x.ok for x in seen)
                if i >= 40 and (live_scrapes >= 9 or time.monotonic() > deadline):
                    break
                await asyncio.sleep(0.25)
        return seen

    seen = asyncio.run(run())
    for name in (up, down):
        times = [x.t for x in seen if x.endpoint == name]
        assert times == sorted(set(times)), "each Prometheus scrape once, in order"
    times = [x.t for x in seen if x.endpoint == up]
    gaps = [b - a for a, b in zip(times[-8:], times[-7:], strict=False)]
    assert gaps and all(0.5 < g < 2.0 for g in gaps), gaps  # scraped every 1 s
    assert src.queries < polls  # polled 4x per scrape interval, queried about twice per scrape
    errors = [x.error for x in seen if x.endpoint == down and not x.ok]
    assert errors and errors[-1] == f"Prometheus at {prom.url} reports {down} down (up == 0)"
    assert src.status(down) == ConnectionStatus("down", detail=errors[-1])
    assert src.status(up) == CONNECTED  # as LiveSource says it


def test_an_instance_that_appears_later_is_read(tmp_path: Path) -> None:
    one = PageServer(Script({"/metrics": Answer(PAGE.encode())}))
    two = PageServer(Script({"/metrics": Answer(data_parallel(PAGE).encode())}))
    with one, two:
        a, b = one.url.removeprefix("http://"), two.url.removeprefix("http://")
        with PrometheusServer.start(tmp_path, jobs={"vllm": [a]}) as prom:
            prom.wait_for(lambda: len(prom.query("up == 1")) == 1, 20)
            src = PrometheusSource(prom.url, backfill_s=600, interval_s=0.25)

            async def run() -> list[Frame]:
                frames = []
                async with src:
                    for i in range(60):
                        if i == 4:
                            prom.scrape({"vllm": [a, b]})  # the fleet grows
                        frames.append(await src.poll())
                        if any(s.endpoint == b for s in frames[-1].scrapes) and i > 8:
                            break
                        await asyncio.sleep(0.25)
                return frames

            frames = asyncio.run(run())
    assert any(s.endpoint == a for s in frames[0].scrapes)
    assert not any(s.endpoint == b for f in frames[:4] for s in f.scrapes)
    later = [f for f in frames if any(s.endpoint == b for s in f.scrapes)]
    assert later, "the new instance was never read"
    assert b in src.endpoints and src.status(b) == CONNECTED
    (first,) = [s for s in later[0].scrapes if s.endpoint == b]
    assert first.ok and first.knobs is not None  # read like any other: knobs on its first


def src_instances(prom: PrometheusServer) -> list[str]:
    return [r["metric"]["instance"] for r in prom.query("up")]


# -- errors -----------------------------------------------------------------------------------


def test_prometheus_unreachable_is_one_line_with_the_url() -> None:
    src = PrometheusSource("http://127.0.0.1:1", backfill_s=0)
    frame = asyncio.run(_first(src))
    (scrape,) = frame.scrapes
    assert scrape.endpoint == "http://127.0.0.1:1"
    assert scrape.error == "cannot connect to Prometheus at http://127.0.0.1:1: connection refused"
    status = src.status(scrape.endpoint)
    assert status.lost and status.text.startswith("reconnecting (attempt 1, next in ")


def test_prometheus_refusing_the_query_is_one_line(static_fleet: dict[str, str]) -> None:
    src = PrometheusSource(static_fleet["prom"], backfill_s=0, match=('job=~"("',))
    (scrape,) = asyncio.run(_first(src)).scrapes
    assert scrape.error is not None and "\n" not in scrape.error
    assert scrape.error.startswith(f"Prometheus at {static_fleet['prom']} refused the query: ")
    assert "bad_data" in scrape.error and "regexp" in scrape.error


def test_no_matching_instance_says_what_was_asked(static_fleet: dict[str, str]) -> None:
    src = PrometheusSource(static_fleet["prom"], backfill_s=0, match=('job="nope"',))
    (scrape,) = asyncio.run(_first(src)).scrapes
    assert scrape.error == (
        f"Prometheus at {static_fleet['prom']} has no vllm:num_requests_running series "
        'matching {job="nope"} in the last 5 min'
    )


def test_credentials_go_to_prometheus_and_a_refusal_has_a_hint() -> None:
    script = Script({"/api/v1/query": Answer(b"unauthorized", status=401)})
    options = ScrapeOptions(headers=(("X-Scope-OrgID", "team-a"),), api_key="s3cret")
    with PageServer(script) as srv:
        src = PrometheusSource(srv.url + "/", options, backfill_s=0)
        (scrape,) = asyncio.run(_first(src)).scrapes
    path, headers = script.requests[0]
    assert path == "/api/v1/query"
    assert headers["Authorization"] == "Bearer s3cret" and headers["X-Scope-OrgID"] == "team-a"
    assert scrape.error == (
        f"Prometheus at {srv.url}: /api/v1/query answered HTTP 401 (text/plain; version=0.0.4; "
        "charset=utf-8), not JSON: Prometheus wants credentials: set VTOP_API_KEY or pass "
        "--header 'Authorization: …'"
    )
    assert "s3cret" not in scrape.error


def test_not_prometheus_is_said_plainly() -> None:
    html = Answer(b"<html>hello</html>", content_type="text/html")
    with PageServer(Script({"/api/v1/query": html})) as srv:
        (scrape,) = asyncio.run(_first(PrometheusSource(srv.url, backfill_s=0))).scrapes
    assert scrape.error == (
        f"Prometheus at {srv.url}: /api/v1/query answered HTTP 200 (text/html), not JSON"
    )


# -- the command line -------------------------------------------------------------------------


def vtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_once_reads_every_instance_from_prometheus(history: History) -> None:
    result = vtop("--prometheus", history.prom, "--once", "--interval", "0.2")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert sorted(e["url"] for e in doc["endpoints"]) == sorted(SCENARIOS)
    assert all(e["status"] == "ok" for e in doc["endpoints"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--match", "{job=vllm}"], "vtop: --match '{job=vllm}': expected label matchers"),
        (["--backfill", "soon"], "vtop: error: argument --backfill: 'soon' is not a duration"),
        (["--url", "http://a:1"], "vtop: --prometheus reads its instances from Prometheus"),
    ],
)
def test_bad_prometheus_arguments_are_one_line(args: list[str], message: str) -> None:
    result = vtop("--prometheus", "http://127.0.0.1:1", "--once", *args)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_all_of_a_store_is_unchanged_downstream(history: History) -> None:
    """The aggregate series exist as for a scraped server: the rules read the same keys."""
    src = PrometheusSource(history.prom, backfill_s=5 * 60)
    monitor = Monitor()
    monitor.feed(asyncio.run(_first(src)))
    store = monitor.endpoints["127.0.0.1:18101"].store
    for signal in ("running", "waiting", "kv_usage", "preemptions", "generation_tokens"):
        assert store.last(SeriesKey(signal, ALL, ALL, "")) is not None, signal
    assert store.hist_quantile(0.9, "ttft", 120) is not None
