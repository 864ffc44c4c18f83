"""One KV-exhausting load run on the real server, watched two ways at once, shared by tests.

Starting vLLM and loading it until the rules may speak costs minutes on two cores, so the
engine-bound server is loaded once (40 clients, a 3,072-token pool, 16 seats) while two
observers poll it every second: a raw scraper that reads the page with prometheus-client
(proving the tooling and the regime independently of vtop's parser), and vtop's own live
path (LiveSource -> Monitor with the shipped rules, discovery included). Requests in flight
are allowed to finish, so every generated token reached a client and totals match exactly.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.host import steal_seconds, steal_since
from tools.vllm_cpu.load import LoadResult, Shape, closed_loop
from vtop.model import Finding, Frame
from vtop.monitor import EndpointView, Monitor
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import ScrapeOptions
from vtop.triage.engine import Engine

KV_HEAVY = Shape(prompt_tokens=(16, 128), max_tokens=(100, 400))
LOAD_SECONDS = 90.0
"""test_calibration_real compares the pages after a 15 s warm-up (75 s at most, 45 at least);
the rules' verdict comes within seconds of the pool filling."""


def samples(text: str) -> dict[str, float]:
    """Sample name -> sum over its label sets (one engine, one model here)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


@dataclass
class KvRun:
    load: LoadResult
    raw_before: dict[str, float]
    raw_after: dict[str, float]
    raw_seen: list[dict[str, float]] = field(default_factory=list)
    pages: list[tuple[float, str]] = field(default_factory=list)
    """(seconds since the load began, the page) for every raw poll while clients were busy."""
    view: EndpointView | None = None
    findings: list[list[Finding]] = field(default_factory=list)
    poll_errors: list[str] = field(default_factory=list)
    """vtop's one-line message for each of its polls that failed."""
    steal: str = ""
    """Each CPU's steal time over the run (`tests.integration.host`): a starved host's mark."""


async def run(url: str) -> KvRun:
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as client:

        async def raw(since: float | None = None) -> dict[str, float]:
            resp = await client.get(f"{url}/metrics")
            resp.raise_for_status()
            if since is not None and time.monotonic() - since <= LOAD_SECONDS:
                out.pages.append((time.monotonic() - since, resp.text))
            return samples(resp.text)

        local = LocalHost()
        source = LiveSource(
            [url],
            ScrapeOptions(timeout_s=5.0),
            gpu=local.gpu,
            host=local.host,
            process_probe=local.process_knobs,
        )
        monitor = Monitor(engine=Engine(Engine.from_catalog(user=False).rules))
        out = KvRun(LoadResult(), {}, {})
        steal = steal_seconds()

        def watch(frame: Frame) -> None:
            monitor.feed(frame)
            out.poll_errors.extend(s.error for s in frame.scrapes if s.error)

        out.raw_before = out.raw_after = await raw()
        async with source:
            watch(await source.poll())
            load = asyncio.create_task(
                closed_loop(url, concurrency=40, duration=LOAD_SECONDS, shape=KV_HEAVY, seed=3)
            )
            loaded_at = time.monotonic()
            while not load.done():
                began = time.monotonic()
                out.raw_seen.append(await raw(loaded_at))
                watch(await source.poll())
                view = next(iter(monitor.endpoints.values()))
                out.findings.append(list(view.findings))
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
            out.load = await load
            watch(await source.poll())
            out.raw_after = await raw()
        local.close()
        out.steal = steal_since(steal)
        out.view = next(iter(monitor.endpoints.values()))
        return out
