"""Time to evaluate the whole shipped rule catalog on one hour of 1 Hz history.

Target: under 2 ms per evaluation on the 2-core development machine. The store holds every
signal the rules read (gauges, counters, histograms, two GPUs) of two data-parallel engines
under a busy workload: engine 0 at the KV wall, engine 1 given far less. So most rules
compute their measures, several fire (memory-ceiling, with its recommendations, and
engine-imbalance) and others are explained away (ttft-queueing): the expensive path, not an
idle one. It prints which rules fire; a change that leaves fewer than two firing exits 1, as
the figure would no longer measure that path.

    .venv/bin/python bench/triage.py [--polls 3600] [--evals 500]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtop.model import GpuReading, GpuStatus, Histogram, Knob, Scrape, SeriesKey
from vtop.signals.store import Store
from vtop.triage.engine import Engine
from vtop.triage.loader import load_catalog
from vtop.triage.ruletest import SECONDS, STEP_TOKENS, TOKENS

EP = "http://127.0.0.1:8000"


def _hist(bounds: tuple[float, ...], counts: list[float], total: float, s: float) -> Histogram:
    return Histogram(bounds, tuple(counts), total, s)


def history(polls: int, seed: int = 1) -> Iterator[tuple[Scrape, GpuStatus]]:
    """A busy, memory-bound server, one poll per second."""
    rng = random.Random(seed)
    counters = dict.fromkeys(
        (
            "generation_tokens",
            "prompt_tokens",
            "preemptions",
            "prefix_cache_queries",
            "prefix_cache_hits",
        ),
        0.0,
    )
    finished = {"stop": 0.0, "length": 0.0}
    hists: dict[tuple[str, str], tuple[tuple[float, ...], list[float], list[float]]] = {
        (engine, name): (bounds, [0.0] * len(bounds), [0.0, 0.0])
        for engine in ("0", "1")
        for name, bounds in (
            ("ttft", SECONDS),
            ("queue_time", SECONDS),
            ("prefill_time", SECONDS),
            ("itl", SECONDS),
            ("e2e", SECONDS),
            ("iteration_tokens", STEP_TOKENS),
            ("prompt_len", TOKENS),
        )
    }

    def observe(engine: str, name: str, v: float, n: int) -> None:
        bounds, counts, tot = hists[(engine, name)]
        for i, b in enumerate(bounds):
            if v <= b:
                counts[i] += n
        tot[0] += n
        tot[1] += v * n

    for i in range(polls):
        t = 1_000_000.0 + i
        running = min(64.0, 40 + 10 * math.sin(i / 30) + rng.random() * 4)
        waiting = max(0.0, 20 + 10 * math.sin(i / 45) + rng.random() * 3)
        kv = min(1.0, 0.9 + rng.random() * 0.09)
        counters["generation_tokens"] += running * 20
        counters["prompt_tokens"] += 3000
        counters["preemptions"] += rng.random() < 0.3
        counters["prefix_cache_queries"] += 3000
        counters["prefix_cache_hits"] += 600
        finished["stop"] += 2
        finished["length"] += 1
        for name, v in (
            ("ttft", 0.4 + rng.random()),
            ("queue_time", 0.3 + rng.random()),
            ("prefill_time", 0.05),
            ("itl", 0.03),
            ("e2e", 8.0),
            ("iteration_tokens", 1500 + rng.random() * 500),
            ("prompt_len", rng.choice((200.0, 400.0, 3000.0))),
        ):
            observe("0", name, v, 3)
        # engine 1: a quarter of the requests, no queue, KV room (the router favours engine 0)
        for name, v in (
            ("ttft", 0.06 + rng.random() * 0.04),
            ("queue_time", 0.0),
            ("prefill_time", 0.05),
            ("itl", 0.02),
            ("e2e", 4.0),
            ("iteration_tokens", 300 + rng.random() * 200),
            ("prompt_len", rng.choice((200.0, 400.0, 3000.0))),
        ):
            observe("1", name, v, 1)
        scalars = {
            SeriesKey("running", "m", "0"): running,
            SeriesKey("waiting", "m", "0"): waiting,
            SeriesKey("kv_usage", "m", "0"): kv,
            SeriesKey("running", "m", "1"): running / 4,
            SeriesKey("waiting", "m", "1"): 0.0,
            SeriesKey("kv_usage", "m", "1"): 0.3 + rng.random() * 0.05,
        }
        scalars.update({SeriesKey(k, "m", "0"): v for k, v in counters.items()})
        scalars.update(
            {SeriesKey("requests_finished", "m", "0", r): v for r, v in finished.items()}
        )
        histos = {
            SeriesKey(n, "m", e): _hist(b, list(c), tot[0], tot[1])
            for (e, n), (b, c, tot) in hists.items()
        }
        gpu = GpuStatus(
            tuple(GpuReading(g, "GPU", util_pct=80 + rng.random() * 20) for g in range(2))
        )
        yield (
            Scrape(
                EP,
                t,
                latency_s=0.02 + rng.random() * 0.01,
                size_bytes=50_000,
                scalars=scalars,
                histograms=histos,
            ),
            gpu,
        )


class View:
    def __init__(self, store: Store, knobs: dict[str, Knob]) -> None:
        self.store = store
        self.knobs = knobs


def evaluation_ms(polls: int, evals: int, firing: list[str] | None = None) -> list[float]:
    """Milliseconds of each of `evals` whole-catalog evaluations over `polls` of history
    (`firing`, if given, receives the rules firing at the last one)."""
    loaded = load_catalog(user=False)
    engine = Engine(loaded.rules.values())
    store = Store(EP, capacity=polls)
    history_polls = history(polls + evals)
    t0 = time.perf_counter()
    for _ in range(polls):
        store.ingest(*next(history_polls))
    built = time.perf_counter() - t0
    knobs = {
        k: Knob(k, v, "flag", "bench")
        for k, v in (
            ("max_num_seqs", 64),
            ("max_num_batched_tokens", 2048),
            ("kv_capacity_tokens", 40000),
            ("kv_cache_dtype", "auto"),
            ("gpu_memory_utilization", 0.85),
            ("enable_prefix_caching", True),
            ("tensor_parallel_size", 1),
        )
    }
    view = View(store, knobs)
    samples = []
    findings = []
    for scrape, gpu in history_polls:
        store.ingest(scrape, gpu)
        t = time.perf_counter()
        findings = engine.evaluate(view)
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    print(
        f"rules: {len(engine.rules)}   store: {len(store)} polls of 1 Hz history "
        f"(ingested in {built:.1f} s)"
    )
    fired = [f for f in findings if f.state == "firing"]
    if firing is not None:
        firing.extend(f.rule for f in fired)
    print(
        "fire: "
        + (
            ", ".join(
                f"{f.rule} ({f.severity.name.lower()}, {len(f.recommendations)} recommendation(s))"
                for f in fired
            )
            or "none"
        )
    )
    others = [
        f"{f.rule}={f.state}" + (f" by {f.suppressed_by}" if f.suppressed_by else "")
        for f in findings
        if f.state != "firing"
    ]
    print("also: " + (", ".join(others) or "none"))
    print(
        f"evaluate(): median {statistics.median(samples):.3f} ms   "
        f"p90 {samples[int(0.9 * len(samples))]:.3f} ms   max {samples[-1]:.3f} ms   "
        f"over {evals} evaluations (target < 2 ms)"
    )
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polls", type=int, default=3600)
    ap.add_argument("--evals", type=int, default=500)
    args = ap.parse_args()
    firing: list[str] = []
    evaluation_ms(args.polls, args.evals, firing)
    if len(firing) < 2:
        sys.exit(
            "bench/triage.py: fewer than two rules fire on its history; it no longer "
            "measures the path that builds findings and recommendations"
        )


if __name__ == "__main__":
    main()
