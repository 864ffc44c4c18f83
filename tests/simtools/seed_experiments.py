"""The seeds' two tuning experiments, rerun on the twin's RTX 4090 preset (a bench and a test
of the twin; not shipped).

Scheduler chapter, §2.3.7: raising max_num_seqs 64 -> 256 took the waiting queue from 200+ to
~0, GPU utilisation 55% -> 92%, QPS x1.7 and the queueing part of TTFT 250 ms -> 40 ms; going
on to 512 without raising max_num_batched_tokens ran the KV pool dry, preemption started and
P99 latency came out 30% worse than at 256.

The twin reproduces them in kind on Qwen2.5-7B-Instruct-AWQ (the seeds' lab set-up on a 4090),
with everything else at vLLM's defaults (max_num_batched_tokens 2048, gpu_memory_utilization
0.92). The load is open-loop chat traffic with long answers that comes in bursts: for 18 s of
every two minutes at 3.5 times the average rate. Capped at 64 the server cannot keep up even
on average; at 256 it absorbs the average and a burst only queues briefly; at 512 a burst is
admitted whole, the sequences outgrow the KV pool, and recompute preemption makes the tail
worse. Bursts are what make the seeds' two observations compatible: without them, a load that
leaves no queue at 256 would never fill more than 256 slots at 512 either.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.simtools.probe import Window, measure
from vtop.sim.hardware import QWEN_4090_AWQ
from vtop.sim.scenarios import Scenario
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sim.workload import Lengths, Poisson, Shape

LOAD = Poisson(
    rate=4.2,
    shapes=(
        Shape(
            prompt=Lengths(400, 0.5, lo=16, hi=3000),
            output=Lengths(1100, 0.5, lo=16, hi=3000),
            max_tokens=3000,
        ),
    ),
    burst_factor=3.5,
    burst_period_s=120.0,
    burst_duty=0.15,
)


@dataclass(frozen=True, slots=True)
class Run:
    """One configuration: the window's figures plus latency percentiles from every request."""

    max_num_seqs: int
    window: Window
    e2e_p50_s: float
    e2e_p99_s: float
    ttft_p99_s: float
    preemptions: float


def scenario(max_num_seqs: int) -> Scenario:
    return Scenario(
        name=f"seed-experiment-{max_num_seqs}",
        title=f"Seed experiment at max_num_seqs {max_num_seqs}",
        cause="The scheduler chapter's tuning experiment (§2.3.7).",
        symptom="",
        rule=None,
        preset=QWEN_4090_AWQ,
        args=ServeArgs(max_num_seqs=max_num_seqs),
        workload=LOAD,
    )


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(
    max_num_seqs: int, *, warmup_s: float = 120.0, window_s: float = 360.0, seed: int = 0
) -> Run:
    """Run one configuration: warm up, then observe a window of three burst periods."""
    twin = Twin(scenario(max_num_seqs), seed=seed, keep_finished=True)
    twin.advance(warmup_s)
    log = twin.engine.log
    assert log is not None
    start = len(log.rows)
    pre0 = twin.engine.stats.preemptions
    window = measure(twin, window_s, 2.0)
    rows = log.rows[start:]
    return Run(
        max_num_seqs=max_num_seqs,
        window=window,
        e2e_p50_s=_pct([r[3] for r in rows], 0.50),
        e2e_p99_s=_pct([r[3] for r in rows], 0.99),
        ttft_p99_s=_pct([r[2] for r in rows], 0.99),
        preemptions=twin.engine.stats.preemptions - pre0,
    )


@dataclass(frozen=True, slots=True)
class Results:
    at64: Run
    at256: Run
    at512: Run

    @property
    def qps_ratio(self) -> float:
        return self.at256.window.requests_per_s / self.at64.window.requests_per_s

    @property
    def p99_change(self) -> float:
        """Relative change of P99 end-to-end latency from 256 to 512."""
        return self.at512.e2e_p99_s / self.at256.e2e_p99_s - 1


def run_all(seed: int = 0) -> Results:
    return Results(run(64, seed=seed), run(256, seed=seed), run(512, seed=seed))


def report(res: Results) -> str:
    """The two experiments side by side with the seed's figures."""
    a, b, c = res.at64.window, res.at256.window, res.at512.window
    rows = [
        ("Experiment 1: max_num_seqs 64 -> 256", "seed", "twin"),
        ("waiting queue (mean)", "200+ -> ~0", f"{a.waiting_mean:.0f} -> {b.waiting_mean:.1f}"),
        (
            "GPU utilisation (NVML-style)",
            "55% -> 92%",
            f"{a.gpu_util_mean:.0%} -> {b.gpu_util_mean:.0%}",
        ),
        ("QPS ratio", "x1.7", f"x{res.qps_ratio:.2f}"),
        (
            "queueing part of TTFT (mean)",
            "250 ms -> 40 ms",
            f"{a.queue_mean_s * 1000:.0f} ms -> {b.queue_mean_s * 1000:.0f} ms",
        ),
        ("", "", ""),
        ("Experiment 2: max_num_seqs 256 -> 512", "seed", "twin"),
        (
            "preemptions (window)",
            "0 -> frequent",
            f"{res.at256.preemptions:.0f} -> {res.at512.preemptions:.0f} "
            f"({c.preemptions_per_s:.2f}/s)",
        ),
        ("KV usage (max)", "-> exhausted", f"{b.kv_max:.2f} -> {c.kv_max:.2f}"),
        ("running (max)", "", f"{b.running_max:.0f} -> {c.running_max:.0f}"),
        (
            "P99 end-to-end latency",
            "+30%",
            f"{res.at256.e2e_p99_s:.0f} s -> {res.at512.e2e_p99_s:.0f} s ({res.p99_change:+.0%})",
        ),
        ("throughput (req/s)", "", f"{b.requests_per_s:.2f} -> {c.requests_per_s:.2f}"),
    ]
    width = max(len(r[0]) for r in rows) + 2
    lines = [f"{r[0]:<{width}}{r[1]:<18}{r[2]}" for r in rows]
    return "\n".join(lines)
