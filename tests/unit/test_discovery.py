"""Configuration discovery: every knob keeps where it came from."""

from __future__ import annotations

from vtop.model import EndpointInfo, Knob
from vtop.sources import discovery

GIB = 1024**3

CACHE_INFO_032 = {
    "block_size": "16",
    "cache_dtype": "auto",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.9",
    "num_gpu_blocks": "2000",
    "num_cpu_blocks": "None",
    "kv_cache_size_tokens": "31000",
}


def test_cache_config_labels_become_metric_knobs() -> None:
    knobs = discovery.from_cache_config(CACHE_INFO_032)
    assert knobs["block_size"] == Knob(
        "block_size", 16, "metrics", "vllm:cache_config_info block_size"
    )
    assert knobs["enable_prefix_caching"].value is True
    assert knobs["gpu_memory_utilization"].value == 0.9
    assert knobs["kv_cache_dtype"].value == "auto"
    # kv_cache_size_tokens is preferred to blocks × block size (wrong for hybrid models)
    assert knobs["kv_capacity_tokens"].value == 31000


def test_capacity_from_blocks_when_size_tokens_is_absent() -> None:
    info = dict(CACHE_INFO_032)
    del info["kv_cache_size_tokens"]
    cap = discovery.from_cache_config(info)["kv_capacity_tokens"]
    assert cap.value == 32000 and "2000 × block_size 16" in cap.detail


def test_defaults_follow_version_and_gpu_tier() -> None:
    d = discovery.defaults("0.32.0", 24 * GIB, 4096)
    assert d["max_num_seqs"].value == 256 and d["max_num_batched_tokens"].value == 2048
    assert d["max_num_seqs"].provenance == "default" and d["max_num_seqs"].assumed
    h100 = discovery.defaults("0.32.0", 80 * GIB, 4096)
    assert (h100["max_num_seqs"].value, h100["max_num_batched_tokens"].value) == (1024, 8192)
    big = discovery.defaults("0.32.0", 180 * GIB, 4096)
    assert big["max_num_batched_tokens"].value == 16384
    v0 = discovery.defaults("0.6.3", None, 8192)
    assert v0["max_num_batched_tokens"].value == 8192
    assert discovery.defaults("0.32.0", None, None)["gpu_memory_utilization"].value == 0.92
    assert discovery.defaults("0.11.0", None, None)["gpu_memory_utilization"].value == 0.9
    assert "GPU unknown" in discovery.defaults(None, None, None)["max_num_seqs"].detail


def test_precedence_metrics_process_flags_defaults() -> None:
    process = {
        "max_num_seqs": Knob("max_num_seqs", 64, "process", "pid 7 --max-num-seqs"),
        "gpu_memory_utilization": Knob("gpu_memory_utilization", 0.5, "process", "pid 7"),
        "tensor_parallel_size": Knob("tensor_parallel_size", 2, "process", "pid 7"),
    }
    knobs = discovery.merge(
        cache_info=CACHE_INFO_032,
        endpoint=EndpointInfo("0.32.0", ("m",), 4096),
        process=process,
        flags=discovery.flag_knobs(None, 4096),
    )
    assert knobs["max_num_seqs"].provenance == "process"
    assert knobs["max_num_batched_tokens"].provenance == "flag"
    assert knobs["gpu_memory_utilization"].provenance == "metrics"  # the server's word wins
    assert knobs["tensor_parallel_size"].value == 2
    assert knobs["max_model_len"] == Knob("max_model_len", 4096, "metrics", "GET /v1/models")
    flagged = discovery.merge(process=process, flags=discovery.flag_knobs(128, None))
    assert flagged["max_num_seqs"].value == 128 and flagged["max_num_seqs"].provenance == "flag"


def test_the_served_names_come_from_v1_models_unless_the_command_line_gives_them() -> None:
    served = EndpointInfo("0.32.0", ("Qwen/Qwen2.5-7B-Instruct-AWQ", "chat"), 4096)
    knobs = discovery.merge(endpoint=served)
    assert knobs["served_model_name"] == Knob(
        "served_model_name",
        "Qwen/Qwen2.5-7B-Instruct-AWQ",
        "metrics",
        "GET /v1/models (first of 2 names)",
    )
    argv = {"served_model_name": Knob("served_model_name", "a", "process", "pid 7")}
    assert discovery.merge(endpoint=served, process=argv)["served_model_name"].value == "a"
    assert "served_model_name" not in discovery.merge(endpoint=EndpointInfo("0.32.0", (), 4096))


def test_infer_cap_from_a_plateau_with_a_queue() -> None:
    running: list[float | None] = [*[16.0] * 12, *[15.0] * 3]
    waiting: list[float | None] = [5.0] * 15
    assert discovery.infer_max_num_seqs(running, waiting) == 16
    assert discovery.infer_max_num_seqs(running, [0.0] * 15) is None  # no queue: proves nothing
    jitter: list[float | None] = [float(8 + i % 7) for i in range(15)]
    assert discovery.infer_max_num_seqs(jitter, waiting) is None  # preemption jitter, no cap


def test_version_parsing() -> None:
    assert discovery.version_tuple("0.10.2rc1") == (0, 10, 2)
    assert discovery.version_tuple("v0.8") == (0, 8, 0)
    assert discovery.version_tuple("dev") is None
