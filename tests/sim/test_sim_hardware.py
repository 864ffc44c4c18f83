"""KV capacity and the roofline against the numbers they must reproduce."""

from __future__ import annotations

import pytest

from vtop.sim.hardware import (
    PRESETS,
    QWEN05_4090_BF16,
    QWEN_4090_AWQ,
    QWEN_4090_BF16,
    QWEN_H100_BF16,
    StepCost,
)
from vtop.sim.serve_args import ServeArgs, resolve


def test_qwen7b_kv_bytes_per_token() -> None:
    assert QWEN_4090_BF16.kv_bytes_per_token == 28 * 4 * 128 * 2 * 2 == 57344
    assert QWEN_4090_BF16.with_kv_cache_dtype("fp8").kv_bytes_per_token == 28672


def test_kv_pool_sizes() -> None:
    bf16 = resolve(ServeArgs(), QWEN_4090_BF16).kv_capacity_tokens
    awq = resolve(ServeArgs(), QWEN_4090_AWQ).kv_capacity_tokens
    fp8 = resolve(ServeArgs(kv_cache_dtype="fp8"), QWEN_4090_BF16).kv_capacity_tokens
    h100 = resolve(ServeArgs(), QWEN_H100_BF16).kv_capacity_tokens
    assert 90_000 < bf16 < 140_000  # ~6.5 GB left after 15.2 GB of weights
    assert 2.0 < awq / bf16 < 3.0
    assert fp8 == pytest.approx(2 * bf16, rel=0.01)
    assert 900_000 < h100 < 1_200_000
    lower = resolve(ServeArgs(gpu_memory_utilization=0.85), QWEN_4090_BF16).kv_capacity_tokens
    assert lower < 0.8 * bf16


def test_refuses_a_pool_smaller_than_one_sequence() -> None:
    with pytest.raises(ValueError, match="cannot hold one max_model_len"):
        resolve(ServeArgs(gpu_memory_utilization=0.7), QWEN_4090_BF16)


def test_defaults_follow_the_device() -> None:
    assert resolve(ServeArgs(), QWEN_4090_AWQ).max_num_batched_tokens == 2048
    h100 = resolve(ServeArgs(), QWEN_H100_BF16)
    assert (h100.max_num_seqs, h100.max_num_batched_tokens) == (1024, 8192)


def test_decode_is_memory_bound_and_prefill_compute_bound() -> None:
    cost = StepCost(QWEN_4090_BF16)
    one, host1 = cost.step(1, 500, 500, 1, 1)
    assert 0.015 < one < 0.025  # 14 GB of weights at ~0.8 TB/s
    eight, _ = cost.step(8, 8 * 500, 8 * 500, 8, 8)
    assert eight < 1.2 * one  # adding sequences is nearly free ...
    prefill, _ = cost.step(2048, 2048, 2048 * 1024, 1, 1)
    assert prefill > 10 * one  # ... until the compute ridge
    assert host1 > 0


def test_gpu_busy_share_grows_with_the_batch() -> None:
    cost = StepCost(QWEN_4090_AWQ)
    k64, h64 = cost.step(64, 64 * 800, 64 * 800, 64, 64)
    k256, h256 = cost.step(256, 256 * 800, 256 * 800, 256, 256)
    util64 = k64 / (k64 + h64)
    util256 = k256 / (k256 + h256)
    assert 0.45 < util64 < 0.7 and util256 > util64 + 0.1
    tput64, tput256 = 64 / (k64 + h64), 256 / (k256 + h256)
    assert 1.3 < tput256 / tput64 < 2.5


def test_presets_registry() -> None:
    assert {"4090-qwen7b-bf16", "4090-qwen7b-awq", "h100-qwen7b-bf16"} <= set(PRESETS)
    assert QWEN05_4090_BF16.model.tied_embeddings
    for p in PRESETS.values():
        assert p.description
