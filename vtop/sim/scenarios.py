"""Named incidents: each one a stated cause, the vtop rule it should trigger, and the setup
(preset, knobs, workload, API server) that reproduces it in the twin.

A scenario is the training ground's unit: "here is a server with a problem, find it". Each
`cause` paragraph says what is wrong in the words an engineer would use, `symptom` says what
the numbers show, and `rule` is the id of the rule in `rules/` that must fire on it (None for
the healthy baseline, on which no tuning rule may fire). `warmup_s` is how long the server
must run before the symptom is established; the demo and the tests start reading after it.
The tests in `tests/sim/test_sim_scenarios.py` hold every scenario to its symptom in numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vtop.sim.frontend import FrontendSpec
from vtop.sim.hardware import (
    QWEN05_4090_BF16,
    QWEN_4090_AWQ,
    QWEN_4090_BF16,
    QWEN_H100_BF16,
    Preset,
)
from vtop.sim.serve_args import ServeArgs
from vtop.sim.workload import ClosedLoop, Lengths, Poisson, Shape, Waves, Workload


@dataclass(frozen=True, slots=True)
class Scenario:
    """One reproducible situation of a vLLM server."""

    name: str
    title: str
    cause: str
    symptom: str
    rule: str | None
    preset: Preset
    args: ServeArgs
    workload: Workload
    frontend: FrontendSpec = field(default_factory=FrontendSpec)
    warmup_s: float = 90.0


CHAT = Shape(
    prompt=Lengths(600, 0.6, lo=32, hi=4000),
    output=Lengths(250, 0.7, lo=8, hi=2048),
    max_tokens=1024,
)
"""A chat turn: ~600-token prompt, ~250-token answer, max_tokens 1024."""

LONG_CHAT = Shape(
    prompt=Lengths(1500, 0.5, lo=200, hi=6000),
    output=Lengths(600, 0.5, lo=64, hi=2048),
    max_tokens=2048,
)
"""Long multi-turn conversations with long answers."""

RAG = Shape(
    prompt=Lengths(1200, 0.3, lo=400, hi=4000),
    output=Lengths(150, 0.5, lo=16, hi=512),
    max_tokens=512,
)
"""Retrieval-augmented questions: long prompts, short answers."""


def _scenarios() -> tuple[Scenario, ...]:
    return (
        Scenario(
            name="healthy",
            title="A well-sized server under moderate chat load",
            cause=(
                "Qwen2.5-7B-AWQ on a 4090 with vLLM's defaults serves a steady stream of chat "
                "requests well inside its capacity: the batch floats below max_num_seqs, the KV "
                "pool has ample room, nothing waits and nothing is preempted. The baseline every "
                "other scenario departs from; no tuning rule should fire."
            ),
            symptom="waiting ~0, no preemptions, KV usage well below 0.8, running < max_num_seqs",
            rule=None,
            preset=QWEN_4090_AWQ,
            args=ServeArgs(),
            workload=Poisson(rate=4.0, shapes=(CHAT,)),
            warmup_s=60.0,
        ),
        Scenario(
            name="memory-ceiling",
            title="The KV pool, not the scheduler, is the wall",
            cause=(
                "Qwen2.5-7B in bf16 takes 15.2 GB of the 4090's 24 GB, leaving a KV pool of "
                "about 100k tokens. Long conversations (~1.5k-token prompts, ~600-token answers) "
                "from 96 concurrent users need far more: the pool fills, requests wait although "
                "the batch is far below max_num_seqs, and the scheduler preempts (recompute) to "
                "make room. Raising max_num_seqs cannot help; quantise the weights (AWQ), use an "
                "FP8 KV cache, raise gpu_memory_utilization or shorten max_model_len."
            ),
            symptom="KV usage ~1, preemptions > 0, waiting > 0 while running < max_num_seqs",
            rule="memory-ceiling",
            preset=QWEN_4090_BF16,
            args=ServeArgs(),
            workload=ClosedLoop(clients=96, shapes=(LONG_CHAT,), think_s=2.0, ramp_s=10.0),
        ),
        Scenario(
            name="budget-too-small",
            title="max_num_seqs caps a batch the GPU and KV pool could widen",
            cause=(
                "The server was started with --max-num-seqs 16 (copied from a latency-tuning "
                "guide) on a 4090 with the AWQ model, whose KV pool could hold well over a hundred "
                "chat sequences. 64 concurrent users keep the batch pinned at 16 while the rest "
                "queue; the GPU is under-used. Raise max_num_seqs (64, then 128)."
            ),
            symptom="running == max_num_seqs, waiting > 0, KV usage well below 1",
            rule="budget-too-small",
            preset=QWEN_4090_AWQ,
            args=ServeArgs(max_num_seqs=16),
            workload=ClosedLoop(clients=64, shapes=(CHAT,), think_s=1.0, ramp_s=5.0),
        ),
        Scenario(
            name="prefill-budget-bound",
            title="A token budget too small for prefill beside a wide decode batch",
            cause=(
                "On an H100 (vLLM's default budget there is 8192 tokens per step) the server was "
                "started with --max-num-batched-tokens 512 to keep inter-token latency low. Each "
                "step, the running decodes take their tokens first and what is left goes to "
                "prefill, so new retrieval-augmented requests (~1.2k-token prompts) trickle in a "
                "chunk at a time: requests wait while the batch is below max_num_seqs and the KV "
                "pool has plenty of room, and every step is full to the token budget. Raise "
                "max_num_batched_tokens (4096-8192)."
            ),
            symptom=(
                "waiting > 0, running < max_num_seqs, KV usage < 0.5, tokens per step ~ "
                "max_num_batched_tokens"
            ),
            rule="prefill-budget-bound",
            preset=QWEN_H100_BF16,
            args=ServeArgs(max_num_seqs=512, max_num_batched_tokens=512),
            workload=ClosedLoop(clients=256, shapes=(RAG,), think_s=2.0, ramp_s=10.0),
        ),
        Scenario(
            name="past-sweet-spot",
            title="max_num_seqs raised past what the KV pool holds",
            cause=(
                "After raising max_num_seqs to 128 the bf16 server no longer queues, but the KV "
                "pool holds only about 100k tokens: when the 128 running conversations grow "
                "long, blocks run out and the scheduler preempts (recompute), throwing away work "
                "and stretching tail latency. The queue stays empty and the batch sits at its "
                "cap. Step max_num_seqs back (to ~96) until preemptions stop."
            ),
            symptom="preemptions > 0, running ~ max_num_seqs, waiting ~0, KV usage ~1",
            rule="past-sweet-spot",
            preset=QWEN_4090_BF16,
            args=ServeArgs(max_num_seqs=128),
            workload=ClosedLoop(
                clients=128,
                shapes=(
                    Shape(
                        Lengths(600, 0.5, lo=32, hi=3000),
                        Lengths(450, 0.6, lo=16, hi=2000),
                        max_tokens=2000,
                    ),
                ),
                think_s=0.2,
                ramp_s=10.0,
            ),
        ),
        Scenario(
            name="client-static-batching",
            title="The client rebuilds static batching: fixed waves, waiting for the slowest",
            cause=(
                "An offline job sends 32 prompts at once and waits for all 32 answers before "
                "sending the next 32. Answers vary from a few tokens to ~1500, so each wave ends "
                "with a handful of long generations running alone: the batch drains to 1-2 "
                "sequences and to 0 between waves, exactly the bubbles continuous batching "
                "exists to remove. No server knob helps; stream requests (keep N in flight)."
            ),
            symptom="running swings from ~32 to 0 every wave; low average batch, idle gaps",
            rule="client-static-batching",
            preset=QWEN_4090_AWQ,
            args=ServeArgs(),
            workload=Waves(
                wave_size=32,
                shapes=(
                    Shape(
                        Lengths(400, 0.5, lo=16, hi=3000),
                        Lengths(200, 1.1, lo=4, hi=1500),
                        max_tokens=1500,
                    ),
                ),
                gap_s=1.0,
            ),
        ),
        Scenario(
            name="long-prompt-starvation",
            title="Long prefills hold the token budget; short requests' TTFT suffers",
            cause=(
                "Mostly short chat requests share the server with occasional 12k-token document "
                "prompts. Running requests are served first, so while a long prompt is "
                "prefilled it takes the whole 2048-token budget every step for ~6 steps and "
                "nothing new is admitted: short requests' time to first token jumps from tens "
                "of milliseconds to seconds. Cap each request's prefill chunk with "
                "--long-prefill-token-threshold (e.g. 512), or cap prompt length."
            ),
            symptom="TTFT p90 >> prefill time of a short prompt; steps full of prompt tokens",
            rule="long-prompt-starvation",
            preset=QWEN_4090_AWQ,
            args=ServeArgs(),
            workload=Poisson(
                rate=1.5,
                shapes=(
                    Shape(
                        Lengths(150, 0.5, lo=16, hi=800),
                        Lengths(120, 0.6, lo=8, hi=600),
                        weight=0.9,
                        max_tokens=600,
                    ),
                    Shape(
                        Lengths(12000, 0.2, lo=6000, hi=20000),
                        Lengths(100, 0.5, lo=8, hi=400),
                        weight=0.1,
                        max_tokens=400,
                        tag=1,
                    ),
                ),
            ),
        ),
        Scenario(
            name="ttft-queueing",
            title="Time to first token is queueing, not prefill",
            cause=(
                "Traffic arrives in bursts (a batch job fires every minute at three times the "
                "average rate). During a burst the batch sits at max_num_seqs and new requests "
                "queue; their prefill takes tens of milliseconds but they wait seconds to be "
                "admitted. TTFT is mostly queue time: look at admission (max_num_seqs, more "
                "replicas, client-side rate limiting), not at prefill speed."
            ),
            symptom="queue share of TTFT > 0.7; waiting > 0 during bursts; prefill time small",
            rule="ttft-queueing",
            preset=QWEN_4090_AWQ,
            args=ServeArgs(max_num_seqs=64),
            workload=Poisson(
                rate=5.0, shapes=(CHAT,), burst_factor=2.5, burst_period_s=60.0, burst_duty=0.3
            ),
        ),
        Scenario(
            name="prefix-cache-ineffective",
            title="Prompts share a long prefix but prefix caching is off",
            cause=(
                "Every request starts with the same ~1.8k-token system prompt and few-shot "
                "examples, but the server runs with --no-enable-prefix-caching (carried over "
                "from an old V0 deployment guide). Each request prefills the whole prompt again: "
                "prefill dominates the GPU and TTFT, prefix-cache hits are zero. Enable prefix "
                "caching (the V1 default)."
            ),
            symptom=(
                "prefix caching off (cache_config_info), no cache hits, long prompts, prompt "
                "tokens far above generated tokens"
            ),
            rule="prefix-cache-ineffective",
            preset=QWEN_4090_AWQ,
            args=ServeArgs(enable_prefix_caching=False),
            workload=Poisson(
                rate=1.5,
                shapes=(
                    Shape(
                        Lengths(2000, 0.1, lo=1850, hi=3000),
                        Lengths(120, 0.5, lo=8, hi=512),
                        max_tokens=512,
                        prefix_len=1800,
                        prefix_groups=1,
                    ),
                ),
            ),
        ),
        Scenario(
            name="underloaded",
            title="Too little concurrency for batching to matter",
            cause=(
                "Two users chat with the server, one request each at a time with pauses to read. "
                "The batch never exceeds two sequences, the KV pool is nearly empty and each "
                "step reads all weights for one or two tokens. Nothing is wrong with the knobs; "
                "tuning max_num_seqs or the token budget changes nothing until load grows."
            ),
            symptom="running <= 2, waiting 0, KV usage ~0",
            rule="underloaded",
            preset=QWEN_4090_AWQ,
            args=ServeArgs(),
            workload=ClosedLoop(clients=2, shapes=(CHAT,), think_s=3.0),
            warmup_s=30.0,
        ),
        Scenario(
            name="frontend-bound",
            title="The API server, not the engine, limits throughput",
            cause=(
                "A small model (Qwen2.5-0.5B) on a 4090 generates faster than the single, "
                "CPU-starved API server process can parse, tokenise and stream: 64 clients keep "
                "requests in flight, but they reach the engine in bursts after each pass of the "
                "event loop; the engine finishes each burst in a fraction of a second and then "
                "idles with running = waiting = 0. /metrics, served by the same loop, answers "
                "late. Scheduler knobs change nothing: give the front end more CPU "
                "(--api-server-count, more cores)."
            ),
            symptom=(
                "most scrapes read running = waiting = 0 while requests are in flight; counters "
                "keep climbing; /metrics answers take ~1 s or more; low GPU utilisation"
            ),
            rule="frontend-bound",
            preset=QWEN05_4090_BF16,
            args=ServeArgs(),
            workload=ClosedLoop(
                clients=64,
                shapes=(Shape(Lengths(200, 0.4, lo=16, hi=1000), Lengths(32, 0.0), max_tokens=32),),
            ),
            frontend=FrontendSpec(per_request_s=0.04, per_output_token_s=5e-5, per_scrape_s=0.05),
            warmup_s=30.0,
        ),
    )


SCENARIOS: dict[str, Scenario] = {s.name: s for s in _scenarios()}


def get_scenario(name: str) -> Scenario:
    """The scenario called `name`; KeyError says which exist."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
