"""Smoke test of the real-vLLM tooling: the KV-exhausted regime shows on the raw /metrics page.

Why it reads the raw page with prometheus-client's parser and not vtop's: it proves the
tooling (server.py, load.py) and the regime itself, independently of vtop's own parser, so a
vtop bug cannot hide behind it. The token check is exact: load.py lets requests in flight
finish, so every token the engine generated was returned to a client.
"""

from __future__ import annotations

import pytest

from tests.integration.kv_run import KvRun
from tests.integration.servers import ENGINE_KV

pytestmark = [pytest.mark.integration, pytest.mark.vllm(ENGINE_KV)]


def test_kv_exhaustion_shows_and_totals_add_up(kv_exhausted_run: KvRun) -> None:
    run = kv_exhausted_run
    before, after, seen = run.raw_before, run.raw_after, run.raw_seen
    assert run.load.errors == 0, run.load.error_samples
    assert run.load.requests > 0
    waiting = [s["vllm:num_requests_waiting"] for s in seen]
    kv_usage = [s["vllm:kv_cache_usage_perc"] for s in seen]
    running = [s["vllm:num_requests_running"] for s in seen]
    assert max(waiting) > 0, f"no request ever waited: {waiting}"
    assert max(kv_usage) >= 0.9, f"KV usage never neared 1: {kv_usage}"
    assert max(running) <= 16, f"running exceeded max_num_seqs: {running}"

    def delta(name: str) -> float:
        return after[name] - before[name]

    assert delta("vllm:num_preemptions_total") > 0
    assert delta("vllm:generation_tokens_total") == run.load.completion_tokens
    assert delta("vllm:prompt_tokens_total") == run.load.prompt_tokens
    assert delta("vllm:request_success_total") == run.load.requests
    assert after["vllm:num_requests_running"] == after["vllm:num_requests_waiting"] == 0
