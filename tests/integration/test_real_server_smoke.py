"""Smoke test of the real-vLLM tooling: the KV-exhausted regime shows on the raw /metrics page.

Why it reads the raw page with prometheus-client's parser and not vtop's: it proves the
tooling (server.py, load.py) and the regime itself, independently of vtop's own parser, so a
vtop bug cannot hide behind it. vtop's integration tests build on the same fixtures.
The token check is exact: load.py lets requests in flight finish, so every token the engine
generated was returned to a client in `usage.completion_tokens`.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tools.vllm_cpu.load import Shape, closed_loop
from tools.vllm_cpu.server import VllmServer

pytestmark = pytest.mark.integration

# 40 clients of up to 128 + 400 tokens against 16 seats and a 3,072-token KV pool.
KV_HEAVY = Shape(prompt_tokens=(16, 128), max_tokens=(100, 400))


def samples(text: str) -> dict[str, float]:
    """Sample name -> sum over its label sets (one engine, one model here)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


async def scrape(client: httpx.AsyncClient, url: str) -> dict[str, float]:
    resp = await client.get(f"{url}/metrics")
    resp.raise_for_status()
    return samples(resp.text)


async def test_kv_exhaustion_shows_and_generated_tokens_add_up(
    engine_server: VllmServer,
) -> None:
    url = engine_server.url
    seen: list[dict[str, float]] = []
    async with httpx.AsyncClient(timeout=30.0) as client:
        before = await scrape(client, url)
        load = asyncio.create_task(
            closed_loop(url, concurrency=40, duration=20.0, shape=KV_HEAVY, seed=7)
        )
        while not load.done():
            began = time.monotonic()
            seen.append(await scrape(client, url))
            await asyncio.sleep(max(0.0, 0.5 - (time.monotonic() - began)))
        result = await load
        after = await scrape(client, url)

    assert result.errors == 0, result.error_samples
    assert result.requests > 0
    waiting = [s["vllm:num_requests_waiting"] for s in seen]
    kv_usage = [s["vllm:kv_cache_usage_perc"] for s in seen]
    running = [s["vllm:num_requests_running"] for s in seen]
    assert max(waiting) > 0, f"no request ever waited: {waiting}"
    assert max(kv_usage) >= 0.9, f"KV usage never neared 1: {kv_usage}"
    assert max(running) <= 16, f"running exceeded max_num_seqs: {running}"
    preempted = after["vllm:num_preemptions_total"] - before["vllm:num_preemptions_total"]
    assert preempted > 0
    generated = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert generated == result.completion_tokens
    prompted = after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
    assert prompted == result.prompt_tokens
    finished = after["vllm:request_success_total"] - before["vllm:request_success_total"]
    assert finished == result.requests
    assert after["vllm:num_requests_running"] == after["vllm:num_requests_waiting"] == 0
