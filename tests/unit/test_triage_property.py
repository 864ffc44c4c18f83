"""Property: over random signal histories, the shipped catalog never contradicts itself.

Histories are built from random regimes (load, KV pressure, preemptions, a starved front end)
held for random spells, with random knobs, so that most rules get to fire somewhere. At every
poll the engine's findings must satisfy the guarantees, whatever the rules say:
- no knob gets "raise" and "lower" (or "enable" and "disable") at once;
- "raise max_num_seqs" never appears while KV is the wall (KV p50 >= 0.9 over 2 min, any
  preemption in 2 min, or memory-ceiling pending or firing);
- budget-too-small and memory-ceiling never fire together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vtop.model import Finding, Knob, Scrape, SeriesKey
from vtop.signals.store import Store
from vtop.triage.engine import Engine
from vtop.triage.loader import load_catalog

EP = "http://127.0.0.1:8000"
ENGINE_RULES = list(load_catalog(user=False).rules.values())
OPPOSITE = {("raise", "lower"), ("lower", "raise"), ("enable", "disable"), ("disable", "enable")}


@dataclass
class View:
    store: Store
    knobs: dict[str, Knob] = field(default_factory=dict)


random_regime = st.tuples(
    st.integers(20, 160),  # how many polls it lasts
    st.one_of(st.sampled_from([1.0, 1.0, 0.5, 0.02]), st.floats(0, 1.2)),  # running / cap
    st.one_of(st.sampled_from([0, 0, 40]), st.integers(0, 60)),  # waiting
    st.one_of(st.sampled_from([0.3, 0.78, 0.88, 0.95]), st.floats(0, 1)),  # KV usage
    st.sampled_from([0.0, 0.0, 0.2, 3.0]),  # preemptions per poll
    st.sampled_from([0.01, 0.01, 0.3, 2.0]),  # scrape latency
    st.sampled_from([0.0, 0.0, 0.0, 0.3, 0.8]),  # share of polls whose gauges read 0
)
NAMED = {  # the symptoms of the brief, so that every transition between them gets tried
    "budget": (1.0, 40, 0.4, 0.0, 0.01, 0.0),
    "memory": (0.5, 30, 0.97, 0.2, 0.01, 0.0),
    "past-sweet-spot": (1.0, 0, 0.95, 0.2, 0.01, 0.0),
    "frontend": (0.3, 5, 0.5, 0.0, 2.0, 0.8),
    "underloaded": (0.02, 0, 0.05, 0.0, 0.01, 0.0),
}
named_regime = st.tuples(st.integers(60, 200), st.sampled_from(sorted(NAMED))).map(
    lambda p: (p[0], *NAMED[p[1]])
)
regime = st.one_of(named_regime, random_regime)


def check(findings: list[Finding], store: Store) -> None:
    advice: dict[str, set[str]] = {}
    for f in findings:
        for rec in f.recommendations:
            assert f.state == "firing", f"{f.rule} gives advice while {f.state}"
            advice.setdefault(rec.knob, set()).add(rec.direction)
    for knob, directions in advice.items():
        assert not any((a, b) in OPPOSITE for a in directions for b in directions), (
            knob, directions)  # fmt: skip
    states = {f.rule: f.state for f in findings}
    kv = store.quantile(0.5, "kv_usage", 120)
    preempted = store.increase("preemptions", 120)
    wall = (
        (kv is not None and kv >= 0.9)
        or (preempted is not None and preempted >= 1)
        or states.get("memory-ceiling") in ("pending", "firing")
    )
    if wall:
        assert "raise" not in advice.get("max_num_seqs", set()), (kv, preempted, states)
    assert not (states.get("memory-ceiling") == "firing"
                and states.get("budget-too-small") == "firing"), states  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    regimes=st.lists(regime, min_size=2, max_size=6),
    cap=st.sampled_from([8, 16, 64, 256]),
    capacity=st.sampled_from([None, 3072, 50000, 400000]),
    seed=st.integers(0, 2**16),
)
def test_the_catalog_never_contradicts_itself(regimes: list[tuple[int, float, int, float, float,
                                              float, float]], cap: int, capacity: int | None,
                                              seed: int) -> None:  # fmt: skip
    import random

    rng = random.Random(seed)
    knobs = {"max_num_seqs": Knob("max_num_seqs", cap, "flag"),
             "max_num_batched_tokens": Knob("max_num_batched_tokens", 2048, "default")}  # fmt: skip
    if capacity is not None:
        knobs["kv_capacity_tokens"] = Knob("kv_capacity_tokens", capacity, "metrics")
    view = View(Store(EP), knobs)
    engine = Engine(ENGINE_RULES)
    t = 0.0
    counters = {"preemptions": 0.0, "generation_tokens": 0.0}
    for polls, share, waiting, kv, preempt, latency, lying in regimes:
        for _ in range(polls):
            t += 1.0
            counters["preemptions"] += preempt
            running = round(min(cap, share * cap) * (0.9 + 0.2 * rng.random()))
            counters["generation_tokens"] += running * 10
            lie = rng.random() < lying
            values = {
                "running": 0.0 if lie else float(running),
                "waiting": 0.0 if lie else float(waiting),
                "kv_usage": 0.0 if lie else min(1.0, kv + rng.random() * 0.05),
                **counters,
            }
            scalars = {SeriesKey(k, "m", "0"): v for k, v in values.items()}
            view.store.ingest(Scrape(EP, t, latency_s=latency, size_bytes=100, scalars=scalars))
            findings = engine.evaluate(view)
            check(findings, view.store)
            for f in findings:
                if f.state == "firing":
                    event(f"fires: {f.rule}")


def test_the_guard_holds_where_the_rules_alone_would_contradict() -> None:
    """budget-too-small's own condition holds (KV p90 < 0.8, at the cap, queued), yet requests
    are preempted: the raise must be withheld and the rule suppressed by the KV wall."""
    knobs = {"max_num_seqs": Knob("max_num_seqs", 64, "flag"),
             "kv_capacity_tokens": Knob("kv_capacity_tokens", 200000, "metrics")}  # fmt: skip
    view = View(Store(EP), knobs)
    engine = Engine(ENGINE_RULES)
    findings: list[Finding] = []
    for i in range(200):
        scalars = {SeriesKey("running", "m", "0"): 64.0, SeriesKey("waiting", "m", "0"): 50.0,
                   SeriesKey("kv_usage", "m", "0"): 0.6,
                   SeriesKey("preemptions", "m", "0"): max(0.0, i - 150.0)}  # fmt: skip
        view.store.ingest(Scrape(EP, float(i), latency_s=0.01, scalars=scalars))
        findings = engine.evaluate(view)
        check(findings, view.store)
    by = {f.rule: f for f in findings}
    assert by["budget-too-small"].state == "suppressed"
    assert by["budget-too-small"].suppressed_by == "past-sweet-spot"
