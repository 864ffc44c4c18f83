"""Render the twin's state as a vLLM /metrics page, through prometheus-client.

vLLM registers prometheus-client Counters, Gauges and Histograms on the default registry and
serves `generate_latest`. The twin keeps its own state (see `stats.py`) and renders it through
the same library with a custom collector that yields metric families, so the text format, the
escaping, the `_total` / `_created` conventions and the `le` formatting are prometheus-client's
own, not imitations. The dialect (`dialects.py`) decides names, help texts, labels and buckets.

The page also carries dcgm-exporter style GPU series (`DCGM_FI_DEV_*` gauges with `gpu`,
`UUID`, `device`, `modelName`, `Hostname` labels) so one scrape shows both sides; on a real box
they come from dcgm-exporter's own endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString

from vtop.model import GpuStatus
from vtop.sim.dialects import Dialect, bucket_bounds
from vtop.sim.families import Family
from vtop.sim.serve_args import Resolved
from vtop.sim.stats import Hist, Stats

_go_float = cast(Callable[[float], str], floatToGoString)
"""prometheus-client's own `le` formatting (1 -> "1.0", 0.001 -> "0.001")."""

MIB = 1024 * 1024
HOSTNAME = "vtop-sim"


class PageState:
    """Everything one render needs, gathered by the twin at scrape time."""

    __slots__ = ("api_cpu_s", "created", "gpu", "resolved", "stats", "throughput")

    def __init__(
        self,
        stats: Stats,
        resolved: Resolved,
        gpu: GpuStatus,
        created: float,
        throughput: tuple[float, float],
        api_cpu_s: float | None = None,
    ) -> None:
        self.api_cpu_s = api_cpu_s
        """CPU seconds the modelled API server has spent (its `process_cpu_seconds_total`)."""
        self.stats = stats
        self.resolved = resolved
        self.gpu = gpu
        self.created = created
        self.throughput = throughput


def cache_config_labels(dialect: Dialect, resolved: Resolved) -> dict[str, str]:
    """`CacheConfig.metrics_info()`: every field as `str(value)`; the set differs by release.

    The "0.32" set is the one a real vLLM 0.32 server writes (captured fixture); "0.10" and
    "0.6" are those releases' `CacheConfig` fields as read from their source.
    """
    a = resolved.args
    p = resolved.preset
    override = str(a.num_gpu_blocks_override)
    common = {
        "block_size": str(a.block_size),
        "gpu_memory_utilization": str(a.gpu_memory_utilization),
        "cache_dtype": p.kv_cache_dtype,
        "is_attention_free": "False",
        "num_gpu_blocks_override": override,
        "sliding_window": "None",
        "enable_prefix_caching": str(a.enable_prefix_caching),
        "num_gpu_blocks": str(resolved.num_gpu_blocks),
        "num_cpu_blocks": "None",
    }
    if dialect.name == "0.6":
        common["swap_space_bytes"] = str(4 * 1024**3)
        common["num_cpu_blocks"] = str(4 * 1024**3 // (a.block_size * p.kv_bytes_per_token))
        common["cpu_offload_gb"] = "0"
        return common
    common.update(
        {
            "prefix_caching_hash_algo": "builtin" if dialect.name == "0.10" else "sha256",
            "kv_sharing_fast_prefill": "False",
            "mamba_page_size_padded": "None",
            "engine": "0",
        }
    )
    if dialect.name == "0.10":
        common.update({"swap_space": "4", "cpu_offload_gb": "0", "calculate_kv_scales": "False"})
        return common
    size = resolved.kv_capacity_tokens
    common.update(
        {
            "_block_size_resolved": "True",
            "cache_hit_alignment_tokens": "None",
            "effective_attention_block_size": str(a.block_size),
            "enable_mamba_shared_prefix_checkpoint": "False",
            "hash_block_size": "None",
            "kv_cache_dtype_skip_layers": "[]",
            "kv_cache_layout": "None",
            "kv_cache_max_concurrency": str(round(size / resolved.max_model_len, 2)),
            "kv_cache_memory_bytes": "None",
            "kv_cache_size_tokens": str(size),
            "kv_offloading_backend": "native",
            "kv_offloading_size": "None",
            "mamba_block_size": "None",
            "mamba_cache_dtype": "auto",
            "mamba_cache_mode": "none",
            "mamba_ssm_cache_dtype": "float32",
            "prefix_cache_retention_interval": "0",
            "prefix_match_unit": "None",
            "replayssm_buffer_len": "16",
            "skip_page_size_padded": "None",
            "swa_bounded_replay": "True",
            "use_kda_recoverssm": "False",
            "use_replayssm": "False",
            "user_specified_block_size": str(a.block_size != 16),
        }
    )
    return common


class _Collector:
    def __init__(self, dialect: Dialect, state: PageState) -> None:
        self.dialect = dialect
        self.state = state

    def collect(self) -> Iterator[Any]:
        d = self.dialect
        st = self.state
        model = {"model_name": st.resolved.preset.served_model_name}
        engine = {**model, "engine": "0"} if d.engine_label else model
        scopes: dict[str, dict[str, str]] = {"engine": engine, "model": model, "none": {}}
        for fam in d.families:
            yield self._family(fam, scopes[fam.scope])
        yield from _dcgm(st.gpu)

    def _family(self, fam: Family, base: dict[str, str]) -> Any:
        st = self.state
        stats = st.stats
        d = self.dialect
        created = st.created
        if fam.kind == "summary":
            m = Metric(fam.name, fam.help, "summary")
            for (handler, _), tally in stats.http.items():
                labels = {**base, "handler": handler}
                total = (
                    tally.request_bytes
                    if fam.source == "http_request_size"
                    else tally.response_bytes
                )
                m.add_sample(fam.name + "_count", labels, tally.count)
                m.add_sample(fam.name + "_sum", labels, total)
                if d.created:
                    m.add_sample(fam.name + "_created", labels, created)
            return m
        if fam.kind == "histogram":
            m = Metric(fam.name, fam.help, "histogram")
            bounds = bucket_bounds(fam.buckets, st.resolved.max_model_len)
            if fam.source == "http_duration":
                for (handler, method), tally in stats.http.items():
                    labels = {**base, "handler": handler, "method": method}
                    self._histogram(m, fam.name, labels, tally.duration, bounds)
            else:
                self._histogram(m, fam.name, base, stats.hist(fam.source), bounds)
            return m
        if fam.kind == "counter":
            m = Metric(fam.name, fam.help, "counter")
            for labels, value in self._counter_values(fam, base):
                m.add_sample(fam.name + "_total", labels, value)
                if d.created:
                    m.add_sample(fam.name + "_created", labels, created)
            return m
        m = Metric(fam.name, fam.help, "gauge")
        for labels, value in self._gauge_values(fam, base):
            m.add_sample(fam.name, labels, value)
        return m

    def _histogram(
        self, m: Any, name: str, labels: dict[str, str], h: Hist, bounds: tuple[float, ...]
    ) -> None:
        cum = h.cumulative(bounds)
        for b, c in zip(bounds, cum, strict=False):
            m.add_sample(name + "_bucket", {**labels, "le": _go_float(b)}, c)
        m.add_sample(name + "_bucket", {**labels, "le": "+Inf"}, cum[-1])
        m.add_sample(name + "_count", labels, h.count)
        m.add_sample(name + "_sum", labels, h.sum)
        if self.dialect.created:
            m.add_sample(name + "_created", labels, self.state.created)

    def _counter_values(
        self, fam: Family, base: dict[str, str]
    ) -> Iterator[tuple[dict[str, str], float]]:
        stats = self.state.stats
        src = fam.source
        if src == "success":
            reasons = list(self.dialect.finish_reasons)
            for reason, n in stats.request_success.items():
                if n and reason not in reasons:
                    reasons.append(reason)
            for reason in reasons:
                yield {**base, "finished_reason": reason}, stats.request_success.get(reason, 0.0)
            return
        if src == "cached_by_source":
            for source in ("device", "host", "p2p", "disk", "external_unspecified"):
                yield {**base, "source": source}, stats.prefix_hits if source == "device" else 0.0
            return
        if src == "admission":
            for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
                yield {**base, "reason": reason}, 0.0
            return
        if src == "http_requests":
            for (handler, method), tally in stats.http.items():
                yield {**base, "handler": handler, "method": method, "status": "2xx"}, tally.count
            return
        if src == "prompt_by_source":
            cached = stats.prompt_tokens_cached
            yield {**base, "source": "local_compute"}, stats.prompt_tokens - cached
            yield {**base, "source": "local_cache_hit"}, cached
            yield {**base, "source": "external_kv_transfer"}, 0.0
            return
        values = {
            "prompt_tokens": stats.prompt_tokens,
            "generation_tokens": stats.generation_tokens,
            "preemptions": stats.preemptions,
            "prefix_queries": stats.prefix_queries,
            "prefix_hits": stats.prefix_hits,
            "prompt_tokens_cached": stats.prompt_tokens_cached,
            "perf_flops": stats.perf_flops,
            "perf_read": stats.perf_read_bytes,
            "perf_write": stats.perf_write_bytes,
            "zero": 0.0,
        }
        yield dict(base), values[src]

    def _gauge_values(
        self, fam: Family, base: dict[str, str]
    ) -> Iterator[tuple[dict[str, str], float]]:
        st = self.state
        stats = st.stats
        src = fam.source
        if src == "cache_info":
            yield cache_config_labels(self.dialect, st.resolved), 1.0
        elif src == "waiting_by_reason":
            yield {**base, "reason": "capacity"}, float(stats.waiting)
            yield {**base, "reason": "deferred"}, 0.0
        elif src == "sleep_state":
            for state, value in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
                yield {**base, "sleep_state": state}, value
        elif src == "block_hit_rate":
            if not st.resolved.args.enable_prefix_caching or stats.prefix_queries == 0:
                yield dict(base), -1.0 if not st.resolved.args.enable_prefix_caching else 0.0
            else:
                yield dict(base), stats.prefix_hits / stats.prefix_queries
        else:
            values = {
                "running": float(stats.running),
                "waiting": float(stats.waiting),
                "kv": stats.kv_usage,
                "zero": 0.0,
                "cpu_hit_rate": -1.0,
                "avg_prompt": st.throughput[0],
                "avg_generation": st.throughput[1],
            }
            yield dict(base), values[src]


_DCGM = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
)


def _dcgm(status: GpuStatus) -> Iterator[Any]:
    if not status.gpus:
        return
    for name, help_ in _DCGM:
        m = Metric(name, help_, "gauge")
        for g in status.gpus:
            labels = {
                "gpu": str(g.index),
                "UUID": g.uuid or "",
                "pci_bus_id": f"00000000:{g.index + 1:02X}:00.0",
                "device": f"nvidia{g.index}",
                "modelName": g.name,
                "Hostname": HOSTNAME,
            }
            used = (g.mem_used_bytes or 0) // MIB
            total = (g.mem_total_bytes or 0) // MIB
            value = {
                "DCGM_FI_DEV_SM_CLOCK": g.sm_clock_mhz or 0.0,
                "DCGM_FI_DEV_GPU_TEMP": round(g.temp_c or 0.0),
                "DCGM_FI_DEV_POWER_USAGE": g.power_w or 0.0,
                "DCGM_FI_DEV_GPU_UTIL": round(g.util_pct or 0.0),
                "DCGM_FI_DEV_FB_FREE": total - used,
                "DCGM_FI_DEV_FB_USED": used,
            }[name]
            m.add_sample(name, labels, float(value))
        yield m


class _ServerProcess:
    """prometheus-client's process metrics, as the simulated API server's process would say them.

    The process is vtop's own, but `process_start_time_seconds` says when the *server* began
    (the twin's epoch): rules read it as the start of everything its counters hold, and a page
    that claimed a start after its own counters began would make that history unusable. Its
    `process_cpu_seconds_total` is the modelled API server's CPU time (`api_cpu_s`, the
    front end's busy seconds), not this process's: frontend-bound reads it as "API server CPU",
    and the simulator's own few hundredths of a core read there as a starved front end's
    "0.00 cores" (issue 18)."""

    def __init__(self, started: float, cpu_s: float | None = None) -> None:
        self._started = started
        self._cpu_s = cpu_s
        self._process = ProcessCollector(registry=None)

    def collect(self) -> Iterator[Metric]:
        for family in self._process.collect():
            if family.name == "process_start_time_seconds":
                family.samples = [s._replace(value=self._started) for s in family.samples]
            elif family.name == "process_cpu_seconds" and self._cpu_s is not None:
                family.samples = [s._replace(value=self._cpu_s) for s in family.samples]
            yield family


def render(dialect: Dialect, state: PageState, *, process_metrics: bool = True) -> bytes:
    """The full /metrics page for `state` in `dialect`."""
    registry = CollectorRegistry(auto_describe=False)
    if process_metrics:
        GCCollector(registry=registry)
        PlatformCollector(registry=registry)
        registry.register(_ServerProcess(state.created, state.api_cpu_s))
    registry.register(_Collector(dialect, state))
    page: bytes = generate_latest(registry)
    return page
