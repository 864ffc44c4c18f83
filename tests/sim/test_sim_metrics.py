"""The twin's /metrics pages: parseable, in each dialect's names, labels and buckets."""

from __future__ import annotations

from functools import cache

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from vtop.sim.dialects import Delta, dialect, normalise
from vtop.sim.families import (
    ITERATION_TOKENS,
    PER_TOKEN_V0,
    PER_TOKEN_V1,
    REQUEST_LATENCY_V1,
    TTFT_V0,
    TTFT_V1,
    gauge,
)
from vtop.sim.scenarios import SCENARIOS
from vtop.sim.stats import build_1_2_5_buckets
from vtop.sim.twin import Twin

MODEL = "Qwen/Qwen2.5-7B-Instruct"


@cache
def busy_twin() -> Twin:
    twin = Twin("memory-ceiling", epoch=1_700_000_000.0)
    twin.warm_up()
    return twin


@cache
def samples(dialect: str) -> dict[str, list[Sample]]:
    """Samples of the busy twin's page by family name (as the parser names families)."""
    page = busy_twin().metrics_text(dialect).decode()
    out: dict[str, list[Sample]] = {}
    for fam in text_string_to_metric_families(page):
        out.setdefault(fam.name, []).extend(fam.samples)
    return out


def names(dialect: str) -> set[str]:
    return {s.name for ss in samples(dialect).values() for s in ss}


def value(dialect: str, name: str, **labels: str) -> float:
    for ss in samples(dialect).values():
        for s in ss:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError(name)


def buckets(dialect: str, name: str) -> list[float]:
    return [
        float(s.labels["le"])
        for s in samples(dialect)[name]
        if s.name == name + "_bucket" and s.labels["le"] != "+Inf"
    ]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("dialect", ["0.6", "0.10", "0.32"])
def test_every_scenario_page_parses(name: str, dialect: str) -> None:
    twin = Twin(name)
    twin.advance(5.0)
    page = twin.metrics_text(dialect).decode()
    fams = list(text_string_to_metric_families(page))
    vllm = [f for f in fams if f.name.startswith("vllm:")]
    assert len(vllm) >= 20
    for fam in vllm:
        if fam.type == "histogram":
            counts = [s.value for s in fam.samples if s.name.endswith("_bucket")]
            assert counts == sorted(counts), fam.name  # cumulative
            total = next(s.value for s in fam.samples if s.name.endswith("_count"))
            assert counts[-1] == total


def test_v1_032_names_labels_and_buckets() -> None:
    n = names("0.32")
    for required in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_requests_waiting_by_reason",
        "vllm:kv_cache_usage_perc",
        "vllm:engine_sleep_state",
        "vllm:num_preemptions_total",
        "vllm:num_preemptions_created",
        "vllm:prompt_tokens_total",
        "vllm:prompt_tokens_cached_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:request_success_total",
        "vllm:iteration_tokens_total_bucket",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:request_time_per_output_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:request_queue_time_seconds_bucket",
        "vllm:request_prefill_time_seconds_bucket",
        "vllm:request_decode_time_seconds_bucket",
        "vllm:request_inference_time_seconds_bucket",
        "vllm:request_prompt_tokens_bucket",
        "vllm:request_generation_tokens_bucket",
        "vllm:request_params_max_tokens_bucket",
        "vllm:cache_config_info",
        "DCGM_FI_DEV_GPU_UTIL",
    ):
        assert required in n, required
    for gone in ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket"):
        assert gone not in n
    assert value("0.32", "vllm:num_requests_running", model_name=MODEL, engine="0") >= 0
    assert buckets("0.32", "vllm:iteration_tokens_total") == list(map(float, ITERATION_TOKENS))
    assert buckets("0.32", "vllm:time_to_first_token_seconds") == list(TTFT_V1)
    assert buckets("0.32", "vllm:inter_token_latency_seconds") == list(PER_TOKEN_V1)
    assert buckets("0.32", "vllm:e2e_request_latency_seconds") == list(REQUEST_LATENCY_V1)
    assert buckets("0.32", "vllm:request_prompt_tokens") == [
        float(b) for b in build_1_2_5_buckets(32768)
    ]
    reasons = {
        s.labels["finished_reason"]
        for s in samples("0.32")["vllm:request_success"]
        if s.name.endswith("_total")
    }
    assert reasons == {"stop", "length", "abort", "error", "repetition"}
    states = {s.labels["sleep_state"]: s.value for s in samples("0.32")["vllm:engine_sleep_state"]}
    assert states == {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0}


def test_032_extras() -> None:
    rej = samples("0.32")["vllm:admission_rejections"]
    assert {s.labels["reason"] for s in rej} == {"max_num_queued_reqs", "max_num_queued_tokens"}
    assert all("engine" not in s.labels and s.labels["model_name"] == MODEL for s in rej)
    assert buckets("0.32", "vllm:request_num_preemptions") == [1, 2, 3, 4, 5, 10, 20]
    # The roofline's FLOPs and bytes feed vLLM's MFU counters (GPU presets only).
    st = busy_twin().engine.stats
    assert value("0.32", "vllm:estimated_flops_per_gpu_total") == st.perf_flops > 1e15
    assert value("0.32", "vllm:estimated_read_bytes_per_gpu_total") > 1e12
    device = value("0.32", "vllm:prompt_tokens_cached_by_source_total", source="device")
    assert device == st.prefix_hits
    http = samples("0.32")["http_requests"]
    assert [s.labels for s in http if s.name == "http_requests_total"] == [
        {"handler": "/v1/completions", "method": "POST", "status": "2xx"}
    ]
    assert value("0.32", "http_requests_total") == sum(st.request_success.values())
    assert value("0.32", "http_request_duration_highr_seconds_count") == st.hist("e2e").count


def test_values_agree_with_the_twin() -> None:
    st = busy_twin().engine.stats
    lab = {"model_name": MODEL, "engine": "0"}
    assert value("0.32", "vllm:num_requests_running", **lab) == st.running
    assert value("0.32", "vllm:num_requests_waiting", **lab) == st.waiting
    by_reason = sum(s.value for s in samples("0.32")["vllm:num_requests_waiting_by_reason"])
    assert by_reason == st.waiting
    assert value("0.32", "vllm:kv_cache_usage_perc", **lab) == pytest.approx(st.kv_usage)
    assert value("0.32", "vllm:num_preemptions_total", **lab) == st.preemptions > 0
    assert value("0.32", "vllm:num_preemptions_created", **lab) == 1_700_000_000.0
    assert value("0.32", "vllm:generation_tokens_total", **lab) == st.generation_tokens
    assert value("0.32", "vllm:prefix_cache_queries_total", **lab) == st.prefix_queries
    assert value("0.32", "vllm:time_to_first_token_seconds_count", **lab) == st.hist("ttft").count


def test_cache_config_info_carries_the_kv_pool() -> None:
    twin = busy_twin()
    (info,) = samples("0.32")["vllm:cache_config_info"]
    assert info.value == 1.0
    lab = info.labels
    assert lab["block_size"] == "16"
    assert lab["num_gpu_blocks"] == str(twin.resolved.num_gpu_blocks)
    assert lab["kv_cache_size_tokens"] == str(twin.resolved.num_gpu_blocks * 16)
    assert lab["enable_prefix_caching"] == "True"
    assert lab["gpu_memory_utilization"] == "0.92"
    assert lab["cache_dtype"] == "auto"
    assert lab["engine"] == "0"


def test_v010_has_deprecated_names_beside_new_ones() -> None:
    n = names("0.10")
    for required in (
        "vllm:gpu_cache_usage_perc",
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "vllm:time_per_output_token_seconds_bucket",
        "vllm:num_preemptions_created",
    ):
        assert required in n, required
    for absent in (
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:num_requests_waiting_by_reason",
        "vllm:prompt_tokens_cached_total",
    ):
        assert absent not in n
    lab = {"model_name": MODEL, "engine": "0"}
    assert value("0.10", "vllm:gpu_cache_usage_perc", **lab) == value(
        "0.10", "vllm:kv_cache_usage_perc", **lab
    )
    reasons = {
        s.labels["finished_reason"]
        for s in samples("0.10")["vllm:request_success"]
        if s.name.endswith("_total")
    }
    assert reasons == {"stop", "length", "abort"}


def test_v06_is_v0() -> None:
    n = names("0.6")
    for required in (
        "vllm:gpu_cache_usage_perc",
        "vllm:cpu_cache_usage_perc",
        "vllm:num_requests_swapped",
        "vllm:avg_prompt_throughput_toks_per_s",
        "vllm:avg_generation_throughput_toks_per_s",
        "vllm:time_per_output_token_seconds_bucket",
        "vllm:num_preemptions_total",
        "vllm:gpu_prefix_cache_hit_rate",
    ):
        assert required in n, required
    for absent in ("vllm:kv_cache_usage_perc", "vllm:num_preemptions_created"):
        assert absent not in n
    assert not any(name.endswith("_created") for name in n if name.startswith("vllm:"))
    for ss in samples("0.6").values():
        for s in ss:
            if s.name.startswith("vllm:") and s.name != "vllm:cache_config_info":
                assert "engine" not in s.labels, s.name
    assert buckets("0.6", "vllm:time_to_first_token_seconds") == list(TTFT_V0)
    assert buckets("0.6", "vllm:time_per_output_token_seconds") == list(PER_TOKEN_V0)
    assert buckets("0.6", "vllm:e2e_request_latency_seconds")[0] == 1.0
    assert value("0.6", "vllm:avg_generation_throughput_toks_per_s") > 100
    assert value("0.6", "vllm:num_requests_swapped") == 0


def test_same_counts_in_every_dialect() -> None:
    """Dialects are views: the same state shows through different bucket grids."""
    e2e = {d: value(d, "vllm:e2e_request_latency_seconds_count") for d in ("0.6", "0.10", "0.32")}
    assert len(set(e2e.values())) == 1
    v0_le_60 = value("0.6", "vllm:e2e_request_latency_seconds_bucket", le="60.0")
    v1_le_60 = value("0.32", "vllm:e2e_request_latency_seconds_bucket", le="60.0")
    assert v0_le_60 == v1_le_60


def test_dcgm_series() -> None:
    twin = busy_twin()
    gpu = twin.gpu_status().gpus[0]
    util = samples("0.32")["DCGM_FI_DEV_GPU_UTIL"][0]
    assert util.labels["modelName"] == "NVIDIA GeForce RTX 4090"
    assert util.labels["gpu"] == "0" and util.labels["UUID"] == gpu.uuid
    assert value("0.32", "DCGM_FI_DEV_FB_USED") + value("0.32", "DCGM_FI_DEV_FB_FREE") == 24564
    for name in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK"):
        assert value("0.32", name) > 0


def test_version_names() -> None:
    assert normalise("0.32.0") == "0.32" and normalise("v0.10.1") == "0.10"
    assert normalise("0.6.6") == "0.6" and normalise("0.9.2") == "0.10"
    with pytest.raises(ValueError, match="emulated dialects"):
        normalise("1.0")


def test_an_older_page_is_the_newest_changed_by_its_delta() -> None:
    """Removed families go, a changed one keeps its place under its new name, a placed one
    lands before the family it names (or last), and a moved one is not written twice."""
    a, b, c, d = (gauge(f"vllm:{n}", n, "zero") for n in "abcd")
    renamed = gauge("vllm:b_old", "b", "zero")
    delta = Delta(
        removed=("vllm:c",),
        changed={"vllm:b": renamed},
        placed=((d, "vllm:a"), ("vllm:a", None)),
    )
    assert delta.apply((a, b, c)) == (d, renamed, a)
    v0 = [f.name for f in dialect("0.6").families]
    assert v0[0] == "vllm:cache_config_info" and v0.count("vllm:cache_config_info") == 1
    assert v0[-3:] == [  # V0 wrote its cache config first, the deprecated averages last
        "vllm:request_success",
        "vllm:avg_prompt_throughput_toks_per_s",
        "vllm:avg_generation_throughput_toks_per_s",
    ]
