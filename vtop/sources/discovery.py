"""What the server is configured with, and how sure vtop is of each value.

No metric exposes `max_num_seqs` or `max_num_batched_tokens`, yet every recommendation starts
from them. So each knob is taken from the best source available and keeps that source
(`Knob.provenance`), best first:

- `metrics`: `vllm:cache_config_info` labels and `/v1/models` (the server says so);
- `process`: the local vLLM process's command line (see `cmdline.py`);
- `flag`: vtop's own `--max-num-seqs` / `--max-num-batched-tokens`, which override the above
  for those two knobs, because the user knows something vtop could not read;
- `inferred`: read from behaviour (running plateaus at a cap while requests wait);
- `default`: the defaults of the server's vLLM version, marked as assumed.

Recommendations built on an assumed value say so and lower their confidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from vtop.model import EndpointInfo, Knob, KnobValue

GIB = 1024**3


def _typed(text: str) -> KnobValue:
    """A `cache_config_info` label value (Python `str()` of the setting) as a typed value."""
    if text in ("None", ""):
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """'0.10.2rc1' -> (0, 10, 2); None when unknown."""
    if not version:
        return None
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not m:
        return None
    return tuple(int(x) for x in m.groups(default="0"))


def from_cache_config(info: Mapping[str, str]) -> dict[str, Knob]:
    """Knobs carried by `vllm:cache_config_info`'s labels."""
    src = "vllm:cache_config_info"
    knobs: dict[str, Knob] = {}
    for label, name in (
        ("block_size", "block_size"),
        ("num_gpu_blocks", "num_gpu_blocks"),
        ("gpu_memory_utilization", "gpu_memory_utilization"),
        ("cache_dtype", "kv_cache_dtype"),
        ("enable_prefix_caching", "enable_prefix_caching"),
        ("kv_cache_max_concurrency", "kv_cache_max_concurrency"),
    ):
        if label in info:
            value = _typed(info[label])
            if value is not None:
                knobs[name] = Knob(name, value, "metrics", f"{src} {label}")
    size = _typed(info.get("kv_cache_size_tokens", ""))
    blocks = knobs.get("num_gpu_blocks")
    block = knobs.get("block_size")
    if isinstance(size, int) and size > 0:
        knobs["kv_capacity_tokens"] = Knob(
            "kv_capacity_tokens", size, "metrics", f"{src} kv_cache_size_tokens"
        )
    elif blocks and block and isinstance(blocks.value, int) and isinstance(block.value, int):
        knobs["kv_capacity_tokens"] = Knob(
            "kv_capacity_tokens", blocks.value * block.value, "metrics",
            f"{src} num_gpu_blocks {blocks.value} × block_size {block.value}",
        )  # fmt: skip
    return knobs


def defaults(
    version: str | None, gpu_mem_bytes: int | None, max_model_len: int | None
) -> dict[str, Knob]:
    """The server's version defaults for the scheduler knobs (OpenAI server on a GPU)."""
    v = version_tuple(version)
    vname = f"vLLM {version}" if version else "vLLM (version unknown)"
    out: dict[str, Knob] = {}
    if v is not None and v < (0, 8):
        tokens = max(max_model_len or 0, 2048)
        detail = f"{vname} default (V0 without chunked prefill: max(max_model_len, 2048))"
        out["max_num_seqs"] = Knob("max_num_seqs", 256, "default", f"{vname} default")
        out["max_num_batched_tokens"] = Knob("max_num_batched_tokens", tokens, "default", detail)
    else:
        if gpu_mem_bytes is None:
            seqs, tokens, tier = 256, 2048, "GPU unknown; assuming one under 70 GiB"
        elif gpu_mem_bytes < 70 * GIB:
            seqs, tokens, tier = 256, 2048, "GPUs under 70 GiB"
        elif gpu_mem_bytes < 160 * GIB:
            seqs, tokens, tier = 1024, 8192, "GPUs of 70 to 160 GiB"
        else:
            seqs, tokens, tier = 1024, 16384, "GPUs of 160 GiB or more"
        out["max_num_seqs"] = Knob("max_num_seqs", seqs, "default", f"{vname} default, {tier}")
        out["max_num_batched_tokens"] = Knob(
            "max_num_batched_tokens", tokens, "default", f"{vname} default, {tier}"
        )
    util = 0.92 if v is not None and v >= (0, 20) else 0.9
    out["gpu_memory_utilization"] = Knob("gpu_memory_utilization", util, "default",
                                         f"{vname} default")  # fmt: skip
    out["tensor_parallel_size"] = Knob("tensor_parallel_size", 1, "default", "vLLM default")
    return out


def merge(
    *,
    cache_info: Mapping[str, str] | None = None,
    endpoint: EndpointInfo | None = None,
    process: Mapping[str, Knob] | None = None,
    flags: Mapping[str, Knob] | None = None,
    gpu_mem_bytes: int | None = None,
) -> dict[str, Knob]:
    """Every knob from its best source (see the module docstring for the order)."""
    endpoint = endpoint or EndpointInfo()
    max_len = endpoint.max_model_len
    knobs = defaults(endpoint.version, gpu_mem_bytes, max_len)
    knobs.update(process or {})
    knobs.update(from_cache_config(cache_info or {}))
    if max_len is not None:
        knobs["max_model_len"] = Knob("max_model_len", max_len, "metrics", "GET /v1/models")
    for name in ("max_num_seqs", "max_num_batched_tokens"):
        if flags and name in flags:
            knobs[name] = flags[name]
    return knobs


def flag_knobs(max_num_seqs: int | None, max_num_batched_tokens: int | None) -> dict[str, Knob]:
    """vtop's own `--max-num-seqs` / `--max-num-batched-tokens`, as knobs."""
    out: dict[str, Knob] = {}
    if max_num_seqs is not None:
        out["max_num_seqs"] = Knob("max_num_seqs", max_num_seqs, "flag", "vtop --max-num-seqs")
    if max_num_batched_tokens is not None:
        out["max_num_batched_tokens"] = Knob(
            "max_num_batched_tokens", max_num_batched_tokens, "flag",
            "vtop --max-num-batched-tokens",
        )  # fmt: skip
    return out


KV_WALL = 0.9
"""KV usage from which a queue may be the KV pool's doing, not the batch cap's."""


def infer_max_num_seqs(
    running: Sequence[float | None],
    waiting: Sequence[float | None],
    kv_usage: Sequence[float | None] | None = None,
) -> int | None:
    """The batch cap read from behaviour: running sits at one ceiling while requests wait.

    Needs at least 10 polls with a queue, and the highest running count seen during them to
    hold for at least half of those polls; otherwise the behaviour proves nothing. Given
    `kv_usage`, a poll counts only when KV was known and below `KV_WALL`: with the pool full,
    the ceiling is the KV wall (memory), not max_num_seqs.
    """
    kv: Sequence[float | None] = kv_usage if kv_usage is not None else [0.0] * len(running)
    queued = [r for r, w, k in zip(running, waiting, kv, strict=False)
              if r is not None and w is not None and w > 0
              and k is not None and k < KV_WALL]  # fmt: skip
    if len(queued) < 10:
        return None
    top = max(queued)
    if top < 1 or sum(1 for r in queued if r == top) < len(queued) / 2:
        return None
    return int(top)


def with_inferred_max_num_seqs(
    knobs: Mapping[str, Knob],
    running: Sequence[float | None],
    waiting: Sequence[float | None],
    kv_usage: Sequence[float | None],
) -> dict[str, Knob]:
    """`knobs` with max_num_seqs read from behaviour when only a version default gave it.

    `inferred` beats `default` and loses to everything else (metrics, process, flag): a value
    the server or the user stated is never replaced by a guess.
    """
    out = dict(knobs)
    current = out.get("max_num_seqs")
    if current is not None and current.provenance not in ("default", "inferred"):
        return out
    cap = infer_max_num_seqs(running, waiting, kv_usage)
    if cap is None:
        return out
    detail = f"running held at {cap} while requests waited, KV usage below {KV_WALL:.0%}"
    out["max_num_seqs"] = Knob("max_num_seqs", cap, "inferred", detail)
    return out
