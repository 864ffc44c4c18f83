"""A busy vLLM engine, synthesised: /metrics pages with evolving counters and histograms.

Tests and bench/trace.py need realistic frames in volume before a recorded day exists: the
series a 0.32 V1 server exposes (names, labels, vLLM's own bucket bounds), counters that grow
at realistic rates, histograms fed by per-request observations, gauges that drift with a
daily load curve, and the GPU/host readings NVML and psutil give (integers where they are
integers, milliwatts, one-decimal percentages). Pages go through the real `PageReader`, so a
frame here is exactly what the live path would have produced. Deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import math
import random
from bisect import bisect_left
from collections.abc import Iterator

from vtop.model import EndpointInfo, Frame, GpuReading, GpuStatus, HostReading, Scrape
from vtop.signals.extract import PageReader
from vtop.sim.families import ITERATION_TOKENS, PER_TOKEN_V1, REQUEST_LATENCY_V1, TTFT_V1
from vtop.sources import discovery

TTFT = TTFT_V1
PER_TOKEN = PER_TOKEN_V1
REQUEST = REQUEST_LATENCY_V1
ITERATION = ITERATION_TOKENS
TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)

HISTS = {
    "vllm:time_to_first_token_seconds": TTFT,
    "vllm:inter_token_latency_seconds": PER_TOKEN,
    "vllm:request_time_per_output_token_seconds": PER_TOKEN,
    "vllm:e2e_request_latency_seconds": REQUEST,
    "vllm:request_queue_time_seconds": REQUEST,
    "vllm:request_prefill_time_seconds": REQUEST,
    "vllm:request_decode_time_seconds": REQUEST,
    "vllm:request_inference_time_seconds": REQUEST,
    "vllm:request_prompt_tokens": TOKENS,
    "vllm:request_generation_tokens": TOKENS,
    "vllm:request_params_max_tokens": TOKENS,
    "vllm:iteration_tokens_total": ITERATION,
}

CACHE_INFO = {
    "block_size": "16",
    "cache_dtype": "auto",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.9",
    "num_gpu_blocks": "2048",
}
MODEL = "Qwen/Qwen2.5-7B-Instruct"


class _Hist:
    __slots__ = ("bins", "bounds", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.bins = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float, weight: int = 1) -> None:
        self.bins[bisect_left(self.bounds, value)] += weight
        self.sum += value * weight


class BusyEngine:
    """One engine under a daily load curve; `step()` advances one poll interval."""

    def __init__(
        self,
        seed: int = 1,
        *,
        start: float = 1_750_000_000.0,
        interval: float = 1.0,
        rate: float = 6.0,
        max_num_seqs: int = 128,
    ) -> None:
        self.rng = random.Random(seed)
        self.t = start
        self.start = start
        self.interval = interval
        self.rate = rate
        self.max_num_seqs = max_num_seqs
        self.hists = {name: _Hist(bounds) for name, bounds in HISTS.items()}
        self.counters = {
            "prompt": 0,
            "gen": 0,
            "preempt": 0,
            "stop": 0,
            "length": 0,
            "abort": 0,
            "pq": 0,
            "ph": 0,
        }
        self.cpu = 0.0
        self.running = 0.0
        self.waiting = 0.0
        self.kv = 0.0
        self.reader = PageReader()
        self.polls = 0
        self.pressure = 0.0
        """0..1 extra load; tests raise it to make a window where KV runs full."""

    def load(self) -> float:
        day = math.sin(2 * math.pi * (self.t - self.start) / 86400.0)
        return max(0.2, 1.0 + 0.5 * day + 0.1 * self.rng.gauss(0, 1) + self.pressure)

    def step(self) -> None:
        rng = self.rng
        self.t += self.interval
        self.polls += 1
        load = self.load()
        lam = self.rate * load * self.interval
        finished = _poisson(rng, lam)
        target = min(self.max_num_seqs, 12 * load * self.rate)
        self.running = max(
            0.0, round(self.running + (target - self.running) * 0.3 + rng.gauss(0, 2))
        )
        self.running = min(self.running, self.max_num_seqs)
        self.waiting = max(0.0, round(max(0.0, (load - 1.2) * 40) + rng.gauss(0, 1.5)))
        self.kv = min(1.0, max(0.0, self.running / self.max_num_seqs * 0.9 + rng.gauss(0, 0.02)))
        if self.kv > 0.95 and rng.random() < 0.5:
            self.counters["preempt"] += rng.randint(1, 3)
        h = self.hists
        gen_total = 0
        for _ in range(finished):
            prompt = min(30000, int(rng.lognormvariate(6.5, 0.8)) + 1)
            gen = min(4000, int(rng.lognormvariate(5.2, 0.7)) + 1)
            max_tokens = rng.choice((256, 512, 1024, 2048))
            gen = min(gen, max_tokens)
            queue = rng.expovariate(1.0 / (0.02 + self.waiting * 0.05))
            prefill = prompt / 9000.0 * (1 + rng.random() * 0.2)
            itl = 0.02 + 0.0003 * self.running + rng.random() * 0.005
            decode = gen * itl
            h["vllm:request_prompt_tokens"].observe(prompt)
            h["vllm:request_generation_tokens"].observe(gen)
            h["vllm:request_params_max_tokens"].observe(max_tokens)
            h["vllm:request_queue_time_seconds"].observe(queue)
            h["vllm:request_prefill_time_seconds"].observe(prefill)
            h["vllm:time_to_first_token_seconds"].observe(queue + prefill)
            h["vllm:request_decode_time_seconds"].observe(decode)
            h["vllm:request_inference_time_seconds"].observe(prefill + decode)
            h["vllm:e2e_request_latency_seconds"].observe(queue + prefill + decode)
            h["vllm:request_time_per_output_token_seconds"].observe(itl)
            self.counters["prompt"] += prompt
            self.counters["pq"] += prompt
            self.counters["ph"] += int(prompt * rng.uniform(0.1, 0.5))
            gen_total += gen
            reason = "length" if gen == max_tokens else ("abort" if rng.random() < 0.01 else "stop")
            self.counters[reason] += 1
        tokens = int(self.running * self.interval / (0.02 + 0.0003 * self.running))
        self.counters["gen"] += tokens
        itl_hist = h["vllm:inter_token_latency_seconds"]
        for _ in range(8):
            itl_hist.observe(0.02 + 0.0003 * self.running + rng.gauss(0, 0.004), tokens // 8)
        steps = int(self.interval * 30)
        it = h["vllm:iteration_tokens_total"]
        for _ in range(6):
            it.observe(max(1, int(self.running + rng.expovariate(1 / 200))), steps // 6)
        self.cpu = round(self.cpu + 0.25 + rng.random() * 0.1, 2)

    def page(self) -> str:
        labels = f'engine="0",model_name="{MODEL}"'
        c = self.counters
        lines = [
            f"vllm:num_requests_running{{{labels}}} {self.running}",
            f"vllm:num_requests_waiting{{{labels}}} {self.waiting}",
            f"vllm:kv_cache_usage_perc{{{labels}}} {self.kv}",
            f"vllm:num_preemptions_total{{{labels}}} {float(c['preempt'])}",
            f"vllm:prompt_tokens_total{{{labels}}} {float(c['prompt'])}",
            f"vllm:generation_tokens_total{{{labels}}} {float(c['gen'])}",
            f"vllm:prefix_cache_queries_total{{{labels}}} {float(c['pq'])}",
            f"vllm:prefix_cache_hits_total{{{labels}}} {float(c['ph'])}",
            f"process_cpu_seconds_total {self.cpu}",
            f"process_start_time_seconds {self.start - 600.25}",
        ]
        for reason in ("stop", "length", "abort"):
            lines.append(
                f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} '
                f"{float(c[reason])}"
            )
        for name, hist in self.hists.items():
            base = name
            cum = 0
            for bound, n in zip(hist.bounds, hist.bins, strict=False):
                cum += n
                lines.append(f'{base}_bucket{{{labels},le="{float(bound)}"}} {float(cum)}')
            cum += hist.bins[-1]
            lines.append(f'{base}_bucket{{{labels},le="+Inf"}} {float(cum)}')
            lines.append(f"{base}_count{{{labels}}} {float(cum)}")
            lines.append(f"{base}_sum{{{labels}}} {hist.sum}")
        info = ",".join(f'{k}="{v}"' for k, v in CACHE_INFO.items())
        lines.append(f"vllm:cache_config_info{{{info}}} 1.0")
        return "\n".join(lines) + "\n"

    def scrape(self, endpoint: str) -> Scrape:
        page = self.page()
        latency = round(0.004 + self.rng.random() * 0.003, 6)
        return self.reader.read(
            page, endpoint=endpoint, t=self.t + latency, latency_s=latency, size_bytes=len(page)
        )

    def gpu(self) -> GpuStatus:
        rng = self.rng
        util = min(100, int(40 + self.running / self.max_num_seqs * 55 + rng.random() * 5))
        reading = GpuReading(
            index=0,
            name="NVIDIA GeForce RTX 4090",
            uuid="GPU-5f1c2d3e",
            util_pct=float(util),
            mem_used_bytes=22_000_000_000 + rng.randrange(0, 50) * 1048576,
            mem_total_bytes=25_757_220_864,
            power_w=round(150 + util * 2.8 + rng.random(), 3),
            power_limit_w=450.0,
            temp_c=float(55 + util // 5),
            sm_clock_mhz=float(2520),
            process_mem_bytes=21_500_000_000,
        )
        return GpuStatus((reading,))

    def host(self) -> HostReading:
        rng = self.rng
        return HostReading(
            cpu_pct=round(20 + rng.random() * 10, 1),
            mem_used_bytes=40_000_000_000 + rng.randrange(0, 1000) * 4096,
            mem_total_bytes=67_000_000_000,
            self_cpu_pct=round(0.5 + rng.random(), 1),
            self_rss_bytes=60_000_000 + rng.randrange(0, 100) * 4096,
        )

    def frame(self, endpoint: str = "http://127.0.0.1:8000") -> Frame:
        scrape = self.scrape(endpoint)
        if self.polls <= 1:
            server = EndpointInfo("0.32.0", (MODEL,), 32768)
            knobs = discovery.merge(
                cache_info=scrape.info, endpoint=server, gpu_mem_bytes=25_757_220_864
            )
            scrape = dataclasses.replace(scrape, knobs=knobs, server=server)
        return Frame(self.t + 0.008, (scrape,), self.gpu(), self.host())


def _poisson(rng: random.Random, lam: float) -> int:
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def busy_frames(n: int, seed: int = 1) -> Iterator[Frame]:
    """`n` consecutive frames of a busy engine (the first carries knobs and server info)."""
    engine = BusyEngine(seed)
    for _ in range(n):
        engine.step()
        yield engine.frame()
