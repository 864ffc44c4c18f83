"""`vtop --url URL --once`: two real polls one interval apart, one JSON document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.pageserver import Answer, PageServer, Script

ROOT = Path(__file__).resolve().parents[2]

PAGE = """vllm:num_requests_running{{engine="0",model_name="qwen"}} 7.0
vllm:num_requests_waiting{{engine="0",model_name="qwen"}} 3.0
vllm:kv_cache_usage_perc{{engine="0",model_name="qwen"}} 0.42
vllm:generation_tokens_total{{engine="0",model_name="qwen"}} {tokens}
vllm:cache_config_info{{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_gpu_blocks="100"}} 1.0
"""


def vtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_once_prints_signals_rates_and_config() -> None:
    polls = iter(range(100))
    script = Script(
        {
            "/metrics": lambda: Answer(PAGE.format(tokens=1000 + 500 * next(polls)).encode()),
            "/version": Answer(b'{"version": "0.32.0"}'),
            "/v1/models": Answer(b'{"data": [{"id": "qwen", "max_model_len": 4096}]}'),
        }
    )
    with PageServer(script) as srv:
        result = vtop("--url", srv.url, "--once", "--interval", "0.5", "--max-num-seqs", "48")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (ep,) = doc["endpoints"]
    assert ep["status"] == "ok" and ep["server"]["version"] == "0.32.0"
    sig = ep["signals"]
    assert sig["running"]["last"] == 7.0
    assert sig["generation_tokens"]["total"] == 1500.0
    assert 500 < sig["generation_tokens"]["per_s"] < 1100  # 500 tokens in ~0.5 s
    cfg = ep["config"]
    assert cfg["max_num_seqs"] == {
        "value": 48,
        "provenance": "flag",
        "detail": "vtop --max-num-seqs",
    }
    assert cfg["kv_capacity_tokens"]["value"] == 1600
    assert cfg["max_num_batched_tokens"]["provenance"] == "default"
    assert cfg["max_model_len"]["value"] == 4096
    assert "unavailable" in doc["gpu"]


def test_once_unreachable_is_unknown_with_one_line() -> None:
    result = vtop("--url", "http://127.0.0.1:1", "--once", "--interval", "0.2")
    assert result.returncode == 3
    doc = json.loads(result.stdout)
    assert doc["endpoints"][0]["error"].startswith("cannot connect to http://127.0.0.1:1/metrics")


def test_bad_header_is_a_usage_error() -> None:
    result = vtop("--url", "http://127.0.0.1:1", "--once", "--header", "nocolon")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Name: value" in result.stderr


def test_once_reports_the_gpus_a_page_carries_and_says_where_they_come_from() -> None:
    """A `vtop sim` server publishes dcgm-exporter GPU series: --once lists those GPUs under
    the endpoint, source "page", even where this host has no NVIDIA driver (the top-level
    `gpu` is this host's NVML reading, and says so when it has none)."""
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtop",
            "sim",
            "--scenario",
            "healthy",
            "--port",
            "0",
            "--duration",
            "60",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert sim.stdout is not None
        url = sim.stdout.readline().split(" on ")[1].split()[0]
        result = vtop("--url", url, "--once", "--interval", "0.5")
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (ep,) = doc["endpoints"]
    assert not any(name.startswith("gpu_") for name in ep["signals"])
    nvml = {str(g["index"]) for g in doc["gpu"]["gpus"]}  # a host with a driver reads its own
    assert [g["gpu"] for g in ep["gpus"]] == ["0"]
    (gpu,) = ep["gpus"]
    assert gpu["source"] == (
        "nvml (this host's driver)" if "0" in nvml else "page (dcgm-exporter series on /metrics)"
    )
    sig = gpu["signals"]
    assert 0 <= sig["gpu_util"]["last"] <= 100
    assert sig["gpu_mem_used"]["last"] > 1024**3  # a model's weights, in bytes
    assert sig["gpu_power"]["last"] > 0 and sig["gpu_temp"]["last"] > 0
