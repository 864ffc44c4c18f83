"""A fleet's size costs vtop requests, not start-up (issue 26, point 7: 1,000 unreachable
targets took 57 s and 900 MB for a 3 s report).

The cost was each endpoint loading the whole CA store into a TLS context of its own (about
35 ms and 0.9 MB each) before the first poll; now one context per setting is shared. This
counts the contexts made for a thousand endpoints and polls them once, every one refused on
loopback, each failure its own line; bench/hostile.py prints the time and memory.
"""

from __future__ import annotations

import asyncio
import ssl

import pytest

from tests.prom import free_port
from vtop.sources import netconfig
from vtop.sources.live import LiveSource
from vtop.sources.prometheus import PrometheusSource
from vtop.sources.vllm import ScrapeOptions


def test_a_thousand_endpoints_share_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        context = real(*args, **kwargs)  # type: ignore[arg-type]
        made.append(context)
        return context

    monkeypatch.setattr(ssl, "create_default_context", counted)
    monkeypatch.setattr(netconfig, "_CONTEXTS", {})
    urls = [f"{'https' if i % 2 else 'http'}://10.0.{i // 250}.{i % 250}:8000" for i in range(1000)]
    source = LiveSource(urls, ScrapeOptions())
    prom = PrometheusSource("https://prom.example:9090", ScrapeOptions())
    insecure = LiveSource(urls[:10], ScrapeOptions(verify_tls=False))
    assert len(made) == 2  # one verifying, one not: for 1,011 clients
    for src in (source, prom, insecure):
        asyncio.run(src.aclose())


def test_a_thousand_refused_endpoints_are_a_thousand_lines_in_one_poll() -> None:
    ports = sorted({free_port() for _ in range(1000)})
    source = LiveSource([f"http://127.0.0.1:{p}" for p in ports], ScrapeOptions(timeout_s=5.0))

    async def go() -> list[str | None]:
        try:
            frame = await source.poll()
        finally:
            await source.aclose()
        return [s.error for s in frame.scrapes]

    errors = asyncio.run(go())
    assert len(errors) == len(ports)
    refused = [e for e in errors if e is not None and e.endswith(": connection refused")]
    assert len(refused) >= len(ports) - 5  # a port another process took meanwhile aside
