"""`vtop --demo SCENARIO --once`: every scenario's page goes through the real data path and
its symptom shows in the numbers vtop prints."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vtop.signals.extract import PageReader
from vtop.sim.scenarios import SCENARIOS
from vtop.sim.twin import Twin

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {
    "running",
    "waiting",
    "kv_usage",
    "preemptions",
    "prompt_tokens",
    "generation_tokens",
    "requests_finished",
    "prefix_cache_queries",
    "prefix_cache_hits",
}
REQUIRED_HISTOGRAMS = {
    "ttft",
    "itl",
    "e2e",
    "queue_time",
    "prefill_time",
    "decode_time",
    "iteration_tokens",
    "prompt_len",
    "generation_len",
}


def once(*args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "--once", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_page_has_the_catalog_signals(name: str) -> None:
    twin = Twin(name, seed=1, epoch=0.0)
    twin.warm_up()
    scrape = PageReader().read(twin.metrics_text().decode(), endpoint="sim", t=0.0)
    assert {k.signal for k in scrape.scalars} >= REQUIRED
    assert {k.signal for k in scrape.histograms} >= REQUIRED_HISTOGRAMS
    assert scrape.info.get("block_size")
    assert all(k.signal != "" for k in scrape.scalars)


def gauge(sig: dict[str, Any], name: str, stat: str = "last") -> float:
    value: float = sig[name][stat]
    return value


def cap(c: dict[str, Any]) -> float:
    value: float = c["max_num_seqs"]["value"]
    return value


def hist(s: dict[str, Any], name: str, stat: str) -> float:
    value: float = s[name][stat]
    return value


def rate(s: dict[str, Any], name: str) -> float:
    value: float = s[name]["per_s"]
    return value


SYMPTOMS: dict[str, Callable[[dict[str, Any], dict[str, Any]], bool]] = {
    "healthy": lambda s, c: (
        gauge(s, "waiting", "avg") < 0.1
        and gauge(s, "kv_usage", "max") < 0.8
        and rate(s, "preemptions") == 0
    ),
    "memory-ceiling": lambda s, c: (
        gauge(s, "kv_usage", "max") > 0.95
        and rate(s, "preemptions") > 0
        and gauge(s, "waiting", "avg") > 0
        and gauge(s, "running", "max") < cap(c)
    ),
    "budget-too-small": lambda s, c: (
        gauge(s, "running", "max") == cap(c)
        and gauge(s, "waiting", "min") > 0
        and gauge(s, "kv_usage", "max") < 0.5
    ),
    "prefill-budget-bound": lambda s, c: (
        gauge(s, "waiting", "min") > 0
        and gauge(s, "running", "max") < cap(c)
        and gauge(s, "kv_usage", "max") < 0.5
        and hist(s, "iteration_tokens", "mean") > 0.8 * c["max_num_batched_tokens"]["value"]
    ),
    "past-sweet-spot": lambda s, c: (
        rate(s, "preemptions") > 0
        and gauge(s, "running", "max") >= 0.9 * cap(c)
        and gauge(s, "waiting", "avg") < 2
    ),
    "client-static-batching": lambda s, c: (
        gauge(s, "running", "min") == 0
        and gauge(s, "running", "max") > 4 * gauge(s, "running", "avg")
    ),
    "long-prompt-starvation": lambda s, c: (
        hist(s, "ttft", "p90") > 10 * hist(s, "ttft", "p50")
        and hist(s, "prompt_len", "mean") > 3 * hist(s, "prompt_len", "p50")
    ),
    "ttft-queueing": lambda s, c: hist(s, "queue_time", "mean") > 0.7 * hist(s, "ttft", "mean"),
    "prefix-cache-ineffective": lambda s, c: (
        c["enable_prefix_caching"]["value"] is False
        and rate(s, "prompt_tokens") > 5 * rate(s, "generation_tokens")
    ),
    "underloaded": lambda s, c: gauge(s, "running", "max") <= 2 and gauge(s, "waiting", "max") == 0,
    "frontend-bound": lambda s, c: (
        gauge(s, "scrape_latency", "avg") > 0.3
        and gauge(s, "running", "avg") < 1
        and rate(s, "generation_tokens") > 0
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_demo_once_shows_the_symptom(name: str) -> None:
    doc = once("--demo", name)
    (ep,) = doc["endpoints"]
    assert ep["url"] == f"sim://{name}" and ep["status"] == "ok"
    assert ep["config"]["max_num_seqs"]["provenance"] == "process"
    assert doc["gpu"]["gpus"][0]["name"]
    assert SYMPTOMS[name](ep["signals"], ep["config"]), json.dumps(ep["signals"])[:2000]


def test_unknown_scenario_is_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "--demo", "nope", "--once"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "vtop: unknown scenario 'nope'; `vtop sim --list` names them"


@pytest.mark.parametrize("version", ["0.32", "0.10", "0.6"])
def test_sim_server_dialects_read_through_the_live_path(version: str) -> None:
    """`vtop sim --emulate-version V` over real HTTP, read by `vtop --url --once`."""
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtop",
            "sim",
            "--scenario",
            "memory-ceiling",
            "--port",
            "0",
            "--emulate-version",
            version,
            "--duration",
            "60",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert sim.stdout is not None
        first = sim.stdout.readline()
        url = first.split(" on ")[1].split()[0]
        doc = once("--url", url, "--interval", "1")
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    (ep,) = doc["endpoints"]
    assert ep["server"]["version"].startswith(version)
    sig = ep["signals"]
    assert gauge(sig, "kv_usage", "max") > 0.9
    assert "itl" in sig and "ttft" in sig
    if version == "0.6":
        assert "swapped" in sig and "cpu_cache_usage" in sig
    assert ep["config"]["block_size"]["provenance"] == "metrics"
