"""The headline numbers of a twin over a window, as a scraper polling it would see them.

The simulator's tests and benches need the same handful of figures (not shipped: vtop itself
reads a twin through its pages, as it reads any server): what the gauges read when sampled
every second (running, waiting, KV usage), how fast the counters climbed (preemptions/s, tokens/s, requests/s), the latency split from histogram deltas (queue
share of TTFT), tokens per engine step, the share of samples that read an idle engine, and how
long /metrics took to answer. Gauges are sampled the way a scraper samples them, which is why
the frontend-bound twin reads running = 0 most of the time although the counters climb.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtop.sim.stats import Stats
from vtop.sim.twin import Twin


@dataclass(frozen=True, slots=True)
class Window:
    """Figures over `duration_s` virtual seconds, gauges sampled every `interval_s`."""

    duration_s: float
    samples: int
    running_mean: float
    running_max: float
    waiting_mean: float
    waiting_max: float
    kv_mean: float
    kv_max: float
    idle_share: float
    in_flight_mean: float
    gpu_util_mean: float
    preemptions_per_s: float
    generation_tps: float
    prompt_tps: float
    requests_per_s: float
    tokens_per_step: float
    ttft_mean_s: float
    queue_mean_s: float
    prefill_mean_s: float
    queue_share_of_ttft: float
    e2e_mean_s: float
    prefix_hit_rate: float
    scrape_delay_mean_s: float
    scrape_delay_max_s: float

    def line(self) -> str:
        """One line for logs and bench output."""
        return (
            f"running {self.running_mean:.1f} (max {self.running_max:.0f}), "
            f"waiting {self.waiting_mean:.1f}, KV {self.kv_mean:.2f} (max {self.kv_max:.2f}), "
            f"preempt {self.preemptions_per_s:.2f}/s, gen {self.generation_tps:.0f} tok/s, "
            f"{self.requests_per_s:.2f} req/s, GPU {self.gpu_util_mean:.0%}, "
            f"tok/step {self.tokens_per_step:.0f}, TTFT {self.ttft_mean_s * 1000:.0f} ms "
            f"(queue {self.queue_share_of_ttft:.0%}), idle {self.idle_share:.0%}, "
            f"in flight {self.in_flight_mean:.0f}, "
            f"scrape {self.scrape_delay_mean_s:.2f} s"
        )


def _totals(st: Stats) -> dict[str, float]:
    h = st.hists
    return {
        "preempt": st.preemptions,
        "gen": st.generation_tokens,
        "prompt": st.prompt_tokens,
        "req": sum(st.request_success.values()),
        "iter_sum": h["iter_tokens"].sum,
        "iter_n": h["iter_tokens"].count,
        "ttft_sum": h["ttft"].sum,
        "ttft_n": h["ttft"].count,
        "queue_sum": h["queue"].sum,
        "queue_n": h["queue"].count,
        "prefill_sum": h["prefill"].sum,
        "prefill_n": h["prefill"].count,
        "e2e_sum": h["e2e"].sum,
        "e2e_n": h["e2e"].count,
        "pq": st.prefix_queries,
        "ph": st.prefix_hits,
    }


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def measure(
    twin: Twin, duration_s: float, interval_s: float = 1.0, *, scrape: bool = False
) -> Window:
    """Advance `twin` by `duration_s`, sampling every `interval_s`; return the figures.

    With `scrape`, each sample also registers a /metrics request with the API server (as a
    real poller would) and records how long it would take to answer.
    """
    st = twin.engine.stats
    before = _totals(st)
    run: list[float] = []
    wait: list[float] = []
    kv: list[float] = []
    util: list[float] = []
    flight: list[float] = []
    delays: list[float] = []
    idle = 0
    t = 0.0
    while t < duration_s - 1e-9:
        step = min(interval_s, duration_s - t)
        twin.advance(step)
        t += step
        if scrape:
            delays.append(twin.scrape_delay())
        run.append(st.running)
        wait.append(st.waiting)
        kv.append(st.kv_usage)
        flight.append(twin.engine.fe.in_flight)
        g = twin.gpu_status()
        util.append((g.gpus[0].util_pct or 0.0) / 100 if g.gpus else 0.0)
        if st.running == 0 and st.waiting == 0:
            idle += 1
    after = _totals(st)
    d = {k: after[k] - before[k] for k in before}
    n = len(run)
    ttft_mean = _ratio(d["ttft_sum"], d["ttft_n"])
    return Window(
        duration_s=duration_s,
        samples=n,
        running_mean=sum(run) / n,
        running_max=max(run),
        waiting_mean=sum(wait) / n,
        waiting_max=max(wait),
        kv_mean=sum(kv) / n,
        kv_max=max(kv),
        idle_share=idle / n,
        in_flight_mean=sum(flight) / n,
        gpu_util_mean=sum(util) / n,
        preemptions_per_s=d["preempt"] / duration_s,
        generation_tps=d["gen"] / duration_s,
        prompt_tps=d["prompt"] / duration_s,
        requests_per_s=d["req"] / duration_s,
        tokens_per_step=_ratio(d["iter_sum"], d["iter_n"]),
        ttft_mean_s=ttft_mean,
        queue_mean_s=_ratio(d["queue_sum"], d["queue_n"]),
        prefill_mean_s=_ratio(d["prefill_sum"], d["prefill_n"]),
        queue_share_of_ttft=_ratio(d["queue_sum"], d["ttft_sum"]),
        e2e_mean_s=_ratio(d["e2e_sum"], d["e2e_n"]),
        prefix_hit_rate=_ratio(d["ph"], d["pq"]),
        scrape_delay_mean_s=sum(delays) / len(delays) if delays else 0.0,
        scrape_delay_max_s=max(delays) if delays else 0.0,
    )
