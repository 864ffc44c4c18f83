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

from vtop import knobs
from vtop.knobs import KV_WALL
from vtop.model import EndpointInfo, Knob


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """'0.10.2rc1' -> (0, 10, 2); None when unknown."""
    if not version:
        return None
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not m:
        return None
    return tuple(int(x) for x in m.groups(default="0"))


def from_cache_config(info: Mapping[str, str]) -> dict[str, Knob]:
    """Knobs carried by `vllm:cache_config_info`'s labels (those `vtop.knobs` reads at `page`)."""
    src = "vllm:cache_config_info"
    found: dict[str, Knob] = {}
    for name, spec in knobs.read_at("page").items():
        label = spec.page_label or name
        value = knobs.read(name, info[label]) if label in info else None
        if value is not None:
            found[name] = Knob(name, value, "metrics", f"{src} {label}")
    size = found.pop("kv_capacity_tokens", None)
    blocks = found.get("num_gpu_blocks")
    block = found.get("block_size")
    if size is not None and isinstance(size.value, int) and size.value > 0:
        found["kv_capacity_tokens"] = size  # prefer it: blocks × block size is wrong for hybrids
    elif blocks and block and isinstance(blocks.value, int) and isinstance(block.value, int):
        found["kv_capacity_tokens"] = Knob(
            "kv_capacity_tokens",
            blocks.value * block.value,
            "metrics",
            f"{src} num_gpu_blocks {blocks.value} × block_size {block.value}",
        )
    return found


def defaults(
    version: str | None, gpu_mem_bytes: int | None, max_model_len: int | None
) -> dict[str, Knob]:
    """The server's version defaults for the scheduler knobs (OpenAI server on a GPU), as
    `vtop.knobs` states them, marked as assumed."""
    v = version_tuple(version)
    vname = f"vLLM {version}" if version else "vLLM (version unknown)"
    scheduler = knobs.scheduler_defaults(v, gpu_mem_bytes, max_model_len)
    v0 = v is not None and v < (0, 8)
    seqs = f"{vname} default" if v0 else f"{vname} default, {scheduler.tier}"
    tokens = f"{vname} default ({scheduler.tier})" if v0 else seqs
    util = knobs.gpu_memory_utilization_default(v)
    return {
        "max_num_seqs": Knob("max_num_seqs", scheduler.max_num_seqs, "default", seqs),
        "max_num_batched_tokens": Knob(
            "max_num_batched_tokens", scheduler.max_num_batched_tokens, "default", tokens
        ),
        "gpu_memory_utilization": Knob(
            "gpu_memory_utilization", util, "default", f"{vname} default"
        ),
        "tensor_parallel_size": Knob("tensor_parallel_size", 1, "default", "vLLM default"),
    }


def merge(
    *,
    cache_info: Mapping[str, str] | None = None,
    endpoint: EndpointInfo | None = None,
    process: Mapping[str, Knob] | None = None,
    flags: Mapping[str, Knob] | None = None,
    gpu_mem_bytes: int | None = None,
    host: Mapping[str, Knob] | None = None,
) -> dict[str, Knob]:
    """Every knob from its best source (see the module docstring for the order); `host`: what
    the hardware of a local server allows (`vtop.sources.cpu`)."""
    endpoint = endpoint or EndpointInfo()
    max_len = endpoint.max_model_len
    knobs = defaults(endpoint.version, gpu_mem_bytes, max_len)
    knobs.update(host or {})
    knobs.update(process or {})
    knobs.update(from_cache_config(cache_info or {}))
    if max_len is not None:
        knobs["max_model_len"] = Knob("max_model_len", max_len, "metrics", "GET /v1/models")
    if endpoint.models and "served_model_name" not in knobs:  # as a command line's: the first
        more = f" (first of {len(endpoint.models)} names)" if len(endpoint.models) > 1 else ""
        knobs["served_model_name"] = Knob(
            "served_model_name", endpoint.models[0], "metrics", f"GET /v1/models{more}"
        )
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
            "max_num_batched_tokens",
            max_num_batched_tokens,
            "flag",
            "vtop --max-num-batched-tokens",
        )
    return out


def infer_max_num_seqs(
    running: Sequence[float | None],
    waiting: Sequence[float | None],
    kv_usage: Sequence[float | None] | None = None,
) -> int | None:
    """The batch cap read from behaviour: running sits at one ceiling while requests wait.

    Needs at least 10 polls with a queue, and the highest running count seen during them to
    hold for at least half of those polls; otherwise the behaviour proves nothing. Given
    `kv_usage`, a poll counts only when KV was known and below `knobs.KV_WALL`: with the pool full,
    the ceiling is the KV wall (memory), not max_num_seqs.
    """
    kv: Sequence[float | None] = kv_usage if kv_usage is not None else [0.0] * len(running)
    queued = [
        r
        for r, w, k in zip(running, waiting, kv, strict=False)
        if r is not None and w is not None and w > 0 and k is not None and k < KV_WALL
    ]
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
