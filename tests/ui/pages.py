"""Deterministic vLLM 0.32-style /metrics pages for UI tests and the overhead bench.

Not a simulator: a fixed load curve (smooth waves over the poll index) turned into the
gauges, counters and histograms a real server exposes, with the same names, labels and bucket
bounds as vLLM 0.32. Pages go through the real parser (`PageReader`) into `Frame`s, so the
screen is tested on the data path users run. `restart_at` resets the counters (a server
restart); `down` makes polls fail (the server went away).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from vtop.model import EndpointInfo, Frame, GpuReading, GpuStatus, HostReading, Knob, Scrape
from vtop.signals.extract import PageReader
from vtop.sim.families import PER_TOKEN_V1, REQUEST_LATENCY_V1
from vtop.sources import discovery

MODEL = "Qwen/Qwen2.5-7B-Instruct"
T0 = 1_796_000_000.0
TTFT_LE = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
ITL_LE = PER_TOKEN_V1
REQ_LE = REQUEST_LATENCY_V1
TOK_LE = (
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    50.0,
    100.0,
    200.0,
    500.0,
    1000.0,
    2000.0,
    5000.0,
    10000.0,
    20000.0,
)
ITER_LE = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)
EXTRA_HISTS = {
    # The rest of a vLLM 0.32 page: series vtop reads only in reports, or not at all, kept so
    # that pages have the real size (~50 KB) and the parser does the real amount of work.
    "e2e_request_latency_seconds": (REQ_LE, 4.0),
    "request_decode_time_seconds": (REQ_LE, 3.5),
    "request_inference_time_seconds": (REQ_LE, 3.6),
    "request_time_per_output_token_seconds": (ITL_LE, 0.05),
    "request_prompt_tokens": (TOK_LE, 600.0),
    "request_generation_tokens": (TOK_LE, 250.0),
    "request_params_max_tokens": (TOK_LE, 1024.0),
    "request_max_num_generation_tokens": (TOK_LE, 1024.0),
    "request_prefill_kv_computed_tokens": (TOK_LE, 380.0),
    "iteration_tokens_total": (ITER_LE, 180.0),
    "request_params_n": ((1.0, 2.0, 5.0, 10.0, 20.0), 1.0),
}
NOISE = (
    "".join(
        f'python_gc_objects_collected_total{{generation="{g}"}} {1000 * (g + 1)}.0\n'
        f'python_gc_collections_total{{generation="{g}"}} {100 * (g + 1)}.0\n'
        for g in range(3)
    )
    + "process_virtual_memory_bytes 1.2e+10\nprocess_resident_memory_bytes 2.1e+09\n"
)
CACHE_INFO = (
    'vllm:cache_config_info{block_size="16",cache_dtype="auto",'
    'enable_prefix_caching="True",gpu_memory_utilization="0.9",'
    'kv_cache_size_tokens="53248",num_gpu_blocks="3328"} 1.0'
)


def _observe(buckets: list[float], bounds: tuple[float, ...], value: float, n: float) -> None:
    for i, b in enumerate(bounds):
        if value <= b:
            buckets[i] += n


@dataclass
class _Hist:
    bounds: tuple[float, ...]
    buckets: list[float] = field(default_factory=list)
    count: float = 0.0
    total: float = 0.0

    def __post_init__(self) -> None:
        self.buckets = [0.0] * len(self.bounds)

    def add(self, value: float, n: float) -> None:
        _observe(self.buckets, self.bounds, value, n)
        self.count += n
        self.total += value * n

    def lines(self, name: str, labels: str) -> list[str]:
        out = [
            f'{name}_bucket{{{labels},le="{b}"}} {c}'
            for b, c in zip(self.bounds, self.buckets, strict=True)
        ]
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


@dataclass
class _Engine:
    counters: dict[str, float] = field(default_factory=dict)
    hists: dict[str, _Hist] = field(default_factory=dict)

    def reset(self) -> None:
        self.counters.clear()
        self.hists = {
            "time_to_first_token_seconds": _Hist(TTFT_LE),
            "request_queue_time_seconds": _Hist(REQ_LE),
            "request_prefill_time_seconds": _Hist(REQ_LE),
            "inter_token_latency_seconds": _Hist(ITL_LE),
        }
        for name, (bounds, _) in EXTRA_HISTS.items():
            self.hists[name] = _Hist(bounds)


class PageMaker:
    """Pages of one endpoint; `pressure` in 0..1 scales the load (1: KV-bound, preempting)."""

    def __init__(self, *, engines: int = 1, pressure: float = 0.9, cap: int = 64) -> None:
        self.engines = [_Engine() for _ in range(engines)]
        for e in self.engines:
            e.reset()
        self.pressure = pressure
        self.cap = cap
        self.start = T0 - 3 * 3600 - 754.0
        self.i = 0

    def restart(self, t: float) -> None:
        for e in self.engines:
            e.reset()
        self.start = t - 5.0

    def page(self) -> str:
        i = self.i
        self.i += 1
        wave = 0.5 + 0.5 * math.sin(i / 23.0) * math.cos(i / 61.0)
        load = min(1.0, self.pressure * (0.55 + 0.45 * wave))
        lines = [NOISE + CACHE_INFO, f"process_start_time_seconds {self.start}"]
        for n, e in enumerate(self.engines):
            lab = f'engine="{n}",model_name="{MODEL}"'
            skew = 1.0 - 0.15 * n
            running = round(self.cap * min(1.0, load * 1.1) * skew)
            waiting = max(0, round(40 * (load - 0.75) * 4 * skew)) if load > 0.75 else 0
            kv = min(1.0, 0.35 + 0.65 * load * skew)
            c = e.counters
            c["prompt"] = c.get("prompt", 0.0) + round(2400 * load * skew)
            c["gen"] = c.get("gen", 0.0) + round(1900 * load * skew)
            c["pre"] = c.get("pre", 0.0) + (round(3 * (load - 0.85) * 10) if load > 0.85 else 0)
            c["stop"] = c.get("stop", 0.0) + round(6 * load)
            c["length"] = c.get("length", 0.0) + (1 if i % 3 == 0 else 0)
            c["hits"] = c.get("hits", 0.0) + round(900 * load)
            c["queries"] = c.get("queries", 0.0) + round(2400 * load)
            queue = 0.02 + 2.5 * max(0.0, load - 0.7)
            prefill = 0.09 + 0.05 * load
            reqs = max(1.0, round(6 * load))
            e.hists["request_queue_time_seconds"].add(queue, reqs)
            e.hists["request_prefill_time_seconds"].add(prefill, reqs)
            e.hists["time_to_first_token_seconds"].add(queue + prefill, reqs * 0.9)
            e.hists["time_to_first_token_seconds"].add(3 * (queue + prefill), reqs * 0.1)
            e.hists["inter_token_latency_seconds"].add(0.03 + 0.05 * load, 1900 * load)
            e.hists["inter_token_latency_seconds"].add(0.2, 20 * load)
            for name, (_, typical) in EXTRA_HISTS.items():
                e.hists[name].add(typical * (0.5 + load), reqs)
            lines += [
                f"vllm:num_requests_running{{{lab}}} {running}.0",
                f"vllm:num_requests_waiting{{{lab}}} {waiting}.0",
                f'vllm:num_requests_waiting_by_reason{{{lab},reason="capacity"}} {waiting}.0',
                f"vllm:kv_cache_usage_perc{{{lab}}} {kv}",
                f"vllm:num_preemptions_total{{{lab}}} {c['pre']}",
                f"vllm:prompt_tokens_total{{{lab}}} {c['prompt']}",
                f"vllm:generation_tokens_total{{{lab}}} {c['gen']}",
                f'vllm:request_success_total{{{lab},finished_reason="stop"}} {c["stop"]}',
                f'vllm:request_success_total{{{lab},finished_reason="length"}} {c["length"]}',
                f"vllm:prefix_cache_hits_total{{{lab}}} {c['hits']}",
                f"vllm:prefix_cache_queries_total{{{lab}}} {c['queries']}",
            ]
            for name, h in e.hists.items():
                lines += h.lines("vllm:" + name, lab)
                lines.append(f"vllm:{name}_created{{{lab}}} {self.start}")
        return "\n".join(lines) + "\n"


GPU = GpuStatus(
    gpus=(
        GpuReading(
            0,
            "NVIDIA GeForce RTX 4090",
            util_pct=91.0,
            mem_used_bytes=22_800_000_000,
            mem_total_bytes=25_757_220_864,
            power_w=312.0,
            power_limit_w=450.0,
            temp_c=71.0,
            sm_clock_mhz=2520.0,
            process_mem_bytes=22_100_000_000,
        ),
    )
)
NO_GPU = GpuStatus(unavailable="NVML: libnvidia-ml.so.1 not found (no NVIDIA driver)")


def knobs(cap: int = 64) -> dict[str, Knob]:
    found = discovery.merge(
        cache_info={
            "block_size": "16",
            "num_gpu_blocks": "3328",
            "kv_cache_size_tokens": "53248",
            "gpu_memory_utilization": "0.9",
        },
        endpoint=EndpointInfo("0.32.0", (MODEL,), 8192),
        process=None,
        flags=None,
        gpu_mem_bytes=25_757_220_864,
    )
    found["max_num_seqs"] = Knob("max_num_seqs", cap, "process", "pid 4242 command line")
    return found


@dataclass
class Endpoint:
    """One scripted endpoint: its URL, its pages, and the polls at which it is down."""

    url: str
    maker: PageMaker = field(default_factory=PageMaker)
    reader: PageReader = field(default_factory=PageReader)
    down: set[int] = field(default_factory=set)
    restart_at: set[int] = field(default_factory=set)
    polls: int = 0
    announced: bool = False

    def scrape(self, t: float) -> Scrape:
        n = self.polls
        self.polls += 1
        if n in self.restart_at:
            self.maker.restart(t)
        if n in self.down:
            self.maker.page()  # time passes on the server all the same
            return Scrape(
                self.url,
                t,
                latency_s=0.001,
                error=f"cannot connect to {self.url}/metrics: connection refused",
            )
        text = self.maker.page()
        latency = 0.011 + 0.002 * (n % 4)
        scrape = self.reader.read(text, endpoint=self.url, t=t, latency_s=latency)
        if not self.announced or n in self.restart_at:
            self.announced = True
            from dataclasses import replace

            scrape = replace(
                scrape, knobs=knobs(self.maker.cap), server=EndpointInfo("0.32.0", (MODEL,), 8192)
            )
        return scrape


def frames(
    endpoints: Iterable[Endpoint],
    n: int,
    *,
    t0: float = T0,
    dt: float = 1.0,
    gpu: GpuStatus = GPU,
    start: int = 0,
) -> list[Frame]:
    """`n` frames, one poll of every endpoint each, `dt` apart from `t0 + start * dt`."""
    eps = list(endpoints)
    out = []
    for k in range(start, start + n):
        t = t0 + k * dt
        scrapes = tuple(ep.scrape(t) for ep in eps)
        out.append(Frame(t, scrapes, gpu, HostReading(self_cpu_pct=0.4)))
    return out
