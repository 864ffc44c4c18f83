"""Derived signals and context values: the one table of what rules may read beyond the catalog.

A rule condition reads canonical signals (`vtop.signals.catalog`) or the derived signals
below, through functions that each map onto one PromQL function. Every entry carries its PromQL
equivalent so that rules can be exported to Prometheus (issue 7) without guessing.

- `instant` derived signals have a value at every poll, computed from that poll's columns
  (`demand = running + waiting`); any function that works on a gauge works on them, and
  `share_over_time` sub-conditions may compare them sample by sample. In PromQL they are
  recording rules.
- `window` derived signals only exist over a range (`prefix_hit_rate = Δhits / Δqueries`);
  conditions read them with `value:`.

Context values are numbers every expression (threshold, rule value, recommendation formula)
may use besides the knobs: the KV fit and the demand the server has shown. Each names the knobs
it depends on, so a recommendation can list every input with its provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vtop import knobs

DerivedKind = Literal["instant", "window"]


@dataclass(frozen=True, slots=True)
class Derived:
    name: str
    kind: DerivedKind
    unit: str
    help: str
    promql: str
    knobs: tuple[str, ...] = ()


DERIVED: dict[str, Derived] = {
    d.name: d
    for d in (
        Derived(
            "demand",
            "instant",
            "requests",
            "Requests in the server: running + waiting. Its high percentile is the batch "
            "width the load asks for.",
            "vllm:num_requests_running + vllm:num_requests_waiting",
        ),
        Derived(
            "idle",
            "instant",
            "0/1",
            "1 at polls where running = waiting = 0, else 0; avg_over_time(idle) is the "
            "idle share.",
            "(vllm:num_requests_running + vllm:num_requests_waiting) == bool 0",
        ),
        Derived(
            "gauges_lie",
            "instant",
            "0/1",
            "1 at polls that read an empty engine (running = waiting = 0), as did the poll "
            "before, although tokens were generated between them: a starved API server "
            "serves stale gauges while the counters climb (a server that really idles "
            "generates nothing between two empty reads). avg_over_time(gauges_lie) is how "
            "often.",
            "((vllm:num_requests_running + vllm:num_requests_waiting) == bool 0) * "
            "(idelta(vllm:num_requests_running[1m]) + idelta(vllm:num_requests_waiting[1m]) "
            "== bool 0) "
            "* (idelta(vllm:generation_tokens_total[1m]) > bool 0)",
        ),
        Derived(
            "kv_tokens_per_seq",
            "instant",
            "tokens",
            "KV tokens held per running sequence: kv_usage × kv_capacity_tokens / running "
            "(unknown when running or KV usage reads 0).",
            "vllm:kv_cache_usage_perc * KV_CAPACITY / (vllm:num_requests_running > 0)",
            ("kv_capacity_tokens",),
        ),
        Derived(
            "kv_used_tokens",
            "instant",
            "tokens",
            "KV tokens in use: kv_usage × kv_capacity_tokens.",
            "vllm:kv_cache_usage_perc * KV_CAPACITY",
            ("kv_capacity_tokens",),
        ),
        Derived(
            "batch_fill",
            "instant",
            "ratio",
            "running / max_num_seqs: 1 when the batch sits at its cap.",
            "vllm:num_requests_running / MAX_NUM_SEQS",
            ("max_num_seqs",),
        ),
        Derived(
            "gpu_util_max",
            "instant",
            "percent",
            "The busiest GPU's utilisation (NVML or DCGM); corroborates, never required.",
            "max(DCGM_FI_DEV_GPU_UTIL)",
        ),
        Derived(
            "kv_spread",
            "instant",
            "ratio",
            "KV usage of the fullest engine minus the emptiest (data-parallel ranks, or "
            "models on one page); unknown with fewer than two.",
            "max(vllm:kv_cache_usage_perc) - min(vllm:kv_cache_usage_perc)",
        ),
        Derived(
            "running_imbalance",
            "instant",
            "ratio",
            "Running requests of the busiest engine over the idlest (at least 1): 1 when "
            "balanced; unknown with fewer than two engines.",
            "max(vllm:num_requests_running) / clamp_min(min(vllm:num_requests_running), 1)",
        ),
        Derived(
            "replica_kv_spread",
            "instant",
            "ratio",
            "KV usage of this endpoint minus the emptiest replica's (endpoints serving the "
            "same models; this one included, so 0 on the emptiest); unknown without a "
            "replica. Written by the monitor after each poll (vtop.triage.replicas).",
            "max by (model_name) (vllm:kv_cache_usage_perc) - on (model_name) group_left "
            "min by (model_name) (max by (instance, model_name) "
            "(vllm:kv_cache_usage_perc))",
        ),
        Derived(
            "replica_running_ratio",
            "instant",
            "ratio",
            "Running requests of this endpoint over the idlest replica's (at least 1): 1 "
            "when balanced; unknown without a replica.",
            "sum by (model_name) (vllm:num_requests_running) / on (model_name) group_left "
            "clamp_min(min by (model_name) (sum by (instance, model_name) "
            "(vllm:num_requests_running)), 1)",
        ),
        Derived(
            "replica_kv_min",
            "instant",
            "ratio",
            "KV usage of the emptiest replica of this endpoint's models (evidence: its name "
            "is the context value replica_peer); unknown without a replica.",
            "min by (model_name) (max by (instance, model_name) (vllm:kv_cache_usage_perc))",
        ),
        Derived(
            "prefix_hit_rate",
            "window",
            "ratio",
            "Prefix-cache hit rate over the window: Δhits / Δqueries.",
            "increase(vllm:prefix_cache_hits_total[W]) / "
            "increase(vllm:prefix_cache_queries_total[W])",
        ),
        Derived(
            "queue_share_of_ttft",
            "window",
            "ratio",
            "Share of time to first token spent queueing: mean queue_time / mean TTFT over W "
            "(means: the two are recorded at different moments of a request), at most 1.",
            "clamp_max((increase(vllm:request_queue_time_seconds_sum[W]) / "
            "increase(vllm:request_queue_time_seconds_count[W])) / "
            "(increase(vllm:time_to_first_token_seconds_sum[W]) / "
            "increase(vllm:time_to_first_token_seconds_count[W])), 1)",
        ),
        Derived(
            "queue_seen",
            "window",
            "ratio",
            "The queue the waiting gauge showed over W against the queue the requests that "
            "finished in W say they waited in (Little's law: seconds of queueing per second is "
            "the mean number waiting): avg_over_time(waiting) / rate(queue_time_sum). Near 1 "
            "when they queued within the window; far under when they queued before it (a "
            "request's queue time is recorded as it finishes, up to its end-to-end latency "
            "after it waited: a burst at the load's start read 100% queueing 30 s later, with "
            "nothing waiting).",
            "avg_over_time(vllm:num_requests_waiting[W]) / "
            "rate(vllm:request_queue_time_seconds_sum[W])",
        ),
        Derived(
            "prefill_share_of_ttft",
            "window",
            "ratio",
            "Share of time to first token spent in prefill: mean prefill_time / mean TTFT "
            "over W (means: the two are recorded at different moments of a request), at "
            "most 1.",
            "clamp_max((increase(vllm:request_prefill_time_seconds_sum[W]) / "
            "increase(vllm:request_prefill_time_seconds_count[W])) / "
            "(increase(vllm:time_to_first_token_seconds_sum[W]) / "
            "increase(vllm:time_to_first_token_seconds_count[W])), 1)",
        ),
        Derived(
            "iteration_fill",
            "window",
            "ratio",
            "How full engine steps are: mean tokens per step / max_num_batched_tokens, at "
            "most 1 (vLLM counts a finishing prefill's first token beside a full chunk).",
            "clamp_max((increase(vllm:iteration_tokens_total_sum[W]) / "
            "increase(vllm:iteration_tokens_total_count[W])) / MAX_NUM_BATCHED_TOKENS, 1)",
            ("max_num_batched_tokens",),
        ),
        Derived(
            "engine_steps_per_s",
            "window",
            "steps/s",
            "Engine steps per second (observations of iteration_tokens). Counts steps even "
            "when the gauges read 0.",
            "rate(vllm:iteration_tokens_total_count[W])",
        ),
        Derived(
            "engine_busy",
            "window",
            "ratio",
            "Share of the time the engine is stepping, from counters only: engine steps per "
            "second × mean inter-token latency (a decode step's length), at most 1. A poll "
            "should read an empty engine at about 1 − this share of polls; far more is gauges "
            "that lie. Survives lying gauges, and a front end that hands out tokens in bursts "
            "(which deflates decode_concurrency, not the count of steps).",
            "clamp_max(rate(vllm:iteration_tokens_total_count[W]) * "
            "(rate(vllm:inter_token_latency_seconds_sum[W]) / "
            "rate(vllm:inter_token_latency_seconds_count[W])), 1)",
        ),
        Derived(
            "decode_concurrency",
            "window",
            "requests",
            "Sequences decoding at once, from counters only (Little's law): "
            "rate(generation_tokens) × mean inter-token latency. Survives lying gauges.",
            "rate(vllm:generation_tokens_total[W]) * "
            "(rate(vllm:inter_token_latency_seconds_sum[W]) / "
            "rate(vllm:inter_token_latency_seconds_count[W]))",
        ),
        Derived(
            "demand_dispersion",
            "window",
            "ratio",
            "Index of dispersion of demand (variance / mean of running + waiting). Requests "
            "arriving independently keep it near 1 (the count in an unsaturated server is "
            "Poisson); synchronised waves push it far above.",
            "stdvar_over_time(demand[W]) / avg_over_time(demand[W])",
        ),
        Derived(
            "wave_refills",
            "window",
            "waves",
            "Refills of the server over the window: polls at which running + waiting rose "
            "by at least half its peak (p95) from at most half of it since the poll before. "
            "A client that sends a batch and waits for all of it refills the server the "
            "moment the batch drains to its tail, once a wave.",
            "count_over_time((delta(demand[1s]) >= 0.5 * P95 and demand offset 1s <= "
            "0.5 * P95)[W:])",
        ),
        Derived(
            "wave_share",
            "window",
            "ratio",
            "Share of the requests the server took in between polls (the rises of running "
            "+ waiting) that came as refills (wave_refills). Synchronised waves bring "
            "nearly all of them that way, the batch only draining in between; requests "
            "arriving independently raise it a few at a time.",
            "sum of the refill rises / sum of all rises of demand over W",
        ),
        Derived(
            "unreplaced_share",
            "window",
            "ratio",
            "Share of the requests finished over W that no new request replaced within "
            "0.5 s (what came in between two polls is the change of running + waiting "
            "plus what finished; each arrival takes the oldest answer still open). A "
            "client that waits for its whole "
            "batch sends nothing while the batch drains (near 1); closed-loop clients "
            "replace each answer with a request (near 0; a third where a starved front end "
            "hands the replacements over in bursts, seconds late).",
            "no PromQL: conserved requests, poll by poll",
        ),
        Derived(
            "unreplaced_drain",
            "window",
            "ratio",
            "The most requests unreplaced_share counts in one run of poll intervals with no "
            "arrival (up to the interval where requests come again) over W, over the batch's "
            "p95: about 1 when a whole wave drained; a finish or two between independent "
            "arrivals.",
            "no PromQL: conserved requests, poll by poll",
        ),
        Derived(
            "prompt_quiet",
            "window",
            "ratio",
            "Share of the intervals between polls in which the server prefilled no prompt "
            "token: no new request began. Requests arriving independently keep it near 0 "
            "under load; a client that sends waves leaves the server without a new prompt "
            "from one wave to the next.",
            "avg_over_time((delta(vllm:prompt_tokens_total[1s]) == bool 0)[W:])",
        ),
        Derived(
            "prompt_len_spread",
            "window",
            "ratio",
            "How much longer the longest prompts are than the typical one: prompt length "
            "p99 / p50 over the window.",
            "histogram_quantile(0.99, rate(vllm:request_prompt_tokens_bucket[W])) / "
            "histogram_quantile(0.5, rate(vllm:request_prompt_tokens_bucket[W]))",
        ),
        Derived(
            "ttft_spread",
            "window",
            "ratio",
            "How much worse the TTFT tail is than the median: TTFT p99 / p50.",
            "histogram_quantile(0.99, rate(vllm:time_to_first_token_seconds_bucket[W])) / "
            "histogram_quantile(0.5, rate(vllm:time_to_first_token_seconds_bucket[W]))",
        ),
        Derived(
            "ttft_p95_imbalance",
            "window",
            "ratio",
            "TTFT p95 of the slowest engine over the fastest, each from its own bucket "
            "deltas over the window; unknown with fewer than two engines.",
            "max(histogram_quantile(0.95, sum by (engine, le) "
            "(rate(vllm:time_to_first_token_seconds_bucket[W])))) / min(…)",
        ),
        Derived(
            "preemptions_per_request",
            "window",
            "ratio",
            "Preemptions per finished request over the window: Δpreemptions / "
            "Δrequests_finished (at least 1). A pool that thrashes preempts about once "
            "per request or more on any hardware, however slow; a server with room "
            "preempts none.",
            "increase(vllm:num_preemptions_total[W]) / "
            "clamp_min(increase(vllm:request_success_total[W]), 1)",
        ),
        Derived(
            "length_finish_share",
            "window",
            "ratio",
            "Share of finished requests that stopped at their max_tokens. Normal when "
            "clients set max_tokens; never a fault by itself.",
            'increase(vllm:request_success_total{finished_reason="length"}[W]) / '
            "increase(vllm:request_success_total[W])",
        ),
    )
}


SINCE_START_VALUES = frozenset(
    {
        "prefix_hit_rate",
        "queue_share_of_ttft",
        "prefill_share_of_ttft",
        "iteration_fill",
        "prompt_len_spread",
        "ttft_spread",
        "length_finish_share",
        "preemptions_per_request",
    }
)
"""Window-derived values made of counters and histograms alone, so the server's own totals
give them since it started (`window: since_start`)."""


@dataclass(frozen=True, slots=True)
class ContextValue:
    name: str
    help: str
    promql: str
    knobs: tuple[str, ...] = ()


CONTEXT_WINDOW_S = 300.0
"""Window of the context values below (5 minutes, clamped to the data since a restart)."""

CONTEXT: dict[str, ContextValue] = {
    c.name: c
    for c in (
        ContextValue(
            "tokens_per_seq",
            "KV tokens per running sequence at the 90th percentile over 5 min.",
            "quantile_over_time(0.9, kv_tokens_per_seq[5m])",
            ("kv_capacity_tokens",),
        ),
        ContextValue(
            "kv_fit",
            "Sequences the KV pool holds at 90% full: 0.9 × kv_capacity_tokens / tokens_per_seq.",
            "0.9 * KV_CAPACITY / quantile_over_time(0.9, kv_tokens_per_seq[5m])",
            ("kv_capacity_tokens",),
        ),
        ContextValue(
            "demand_p95",
            "Requests in the server (running + waiting) at the 95th percentile over "
            "5 min: the demand the load has shown.",
            "quantile_over_time(0.95, demand[5m])",
        ),
        ContextValue(
            "replica_peer",
            "The emptiest other replica (an endpoint serving the same models: least "
            "KV usage, then fewest running) at the latest poll, by name; text, for "
            "evidence. Unknown without a replica.",
            "the instance label of min by (model_name) (vllm:kv_cache_usage_perc) "
            "(vtop only: PromQL cannot return a label as a value)",
        ),
        ContextValue(
            "uptime_s",
            "Seconds of history since vtop started watching or the server restarted.",
            "time() - process_start_time_seconds",
        ),
    )
}

KNOBS: dict[str, str] = {name: s.meaning for name, s in knobs.KNOBS.items() if s.rules_read}
"""Knob names an expression may read, with their meaning (`vtop.knobs`; values come from
`vtop.sources.discovery`)."""


def name_known(name: str) -> bool:
    """Whether an expression may read `name` (a knob or a context value)."""
    return name in KNOBS or name in CONTEXT
