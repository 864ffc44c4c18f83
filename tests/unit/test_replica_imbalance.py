"""`replica-imbalance`: endpoints serving the same model that do not share the load (issue 7).

Each endpoint's page is the captured vLLM 0.32 page (tests/fixtures/metrics/vllm-0.32/busy.txt)
with its running / waiting / KV gauges set per endpoint, read by the real parser, fed to the
real `Monitor` with the shipped catalog, one frame a second holding every endpoint's scrape,
as the live source delivers them. The model each server names comes from `/v1/models`
(`EndpointInfo`), as the live source reads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from vtop.model import EndpointInfo, Frame, Knob, Scrape
from vtop.monitor import Monitor
from vtop.signals.extract import PageReader
from vtop.triage import replicas
from vtop.triage.engine import Engine
from vtop.triage.measure import Snapshot
from vtop.triage.schema import Measure, Operand

PAGE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-0.32" / "busy.txt"
).read_text()
MODEL = "vtop/engine"  # the captured page's model_name
KNOBS = {"max_num_seqs": Knob("max_num_seqs", 64, "flag")}
A, B, C = "http://a:8000", "http://b:8000", "http://c:8000"
FULL = {"kv": 0.98, "running": 40.0, "waiting": 6.0}
EMPTY = {"kv": 0.12, "running": 3.0, "waiting": 0.0}
GAUGES = {"kv": "kv_cache_usage_perc", "running": "num_requests_running",
          "waiting": "num_requests_waiting"}  # fmt: skip


def page(load: dict[str, float]) -> str:
    """The captured page with this endpoint's gauges."""
    text = PAGE
    for what, metric in GAUGES.items():
        text, n = re.subn(rf"^(vllm:{metric}\{{[^}}]*\}}) \S+$", rf"\g<1> {load[what]!r}", text,
                          flags=re.M)  # fmt: skip
        assert n == 1, metric
    return text


def run(
    loads: dict[str, dict[str, float] | list[dict[str, float]]],
    models: Mapping[str, tuple[str, ...]] | None = None,
    polls: int = 300,
) -> tuple[Monitor, dict[str, list[str]]]:
    """Feed `polls` frames of every endpoint; a load may change per poll (a list, cycled)."""
    monitor = Monitor(engine=Engine.from_catalog(user=False))
    readers = {ep: PageReader() for ep in loads}
    states: dict[str, list[str]] = {ep: [] for ep in loads}
    for i in range(polls):
        t = 1000.0 + i
        scrapes = []
        for ep, load in loads.items():
            now = load[i % len(load)] if isinstance(load, list) else load
            scrape = readers[ep].read(page(now), endpoint=ep, t=t, latency_s=0.01)
            if i == 0:
                served = (models or {}).get(ep, (MODEL,))
                scrape = replace(scrape, knobs=KNOBS, server=EndpointInfo(models=served))
            scrapes.append(scrape)
        monitor.feed(Frame(t, tuple(scrapes)))
        for ep in loads:
            found = {f.rule: f.state for f in monitor.endpoints[ep].findings}
            states[ep].append(found.get("replica-imbalance", "-"))
    return monitor, states


def measure(monitor: Monitor, ep: str, signal: str) -> float | None:
    snap = Snapshot(monitor.endpoints[ep].store, KNOBS, None)
    return snap.measure(Measure("max_over_time", Operand(signal), 0.5))


def test_the_full_replica_fires_after_its_evidence_and_names_the_empty_one() -> None:
    monitor, states = run({A: FULL, B: EMPTY})
    assert "firing" not in states[A][:170]  # 2 min of history, then held for 1 min
    assert states[A][200:] == ["firing"] * 100
    assert set(states[B]) == {"-"}  # never on the idle replica
    f = next(f for f in monitor.endpoints[A].findings if f.rule == "replica-imbalance")
    assert f.endpoint == A and f.recommendations == ()  # routing, not a scheduler knob
    assert "KV 98% here vs 12% on http://b:8000" in f.summary
    assert "13.3x the idlest replica" in f.summary
    evidence = dict(f.evidence)
    assert evidence["KV usage here vs the emptiest replica (p50, 2 min)"] == (
        "98% here vs 12% on http://b:8000"
    )
    assert evidence["KV usage above the emptiest replica (p50)"] == "86%"
    assert measure(monitor, A, "replica_kv_spread") == 0.98 - 0.12
    assert measure(monitor, B, "replica_kv_spread") == 0.0
    assert measure(monitor, A, "replica_running_ratio") == 40 / 3


def test_the_busiest_of_three_names_the_emptiest_and_the_emptiest_stays_silent() -> None:
    half = {"kv": 0.5, "running": 12.0, "waiting": 0.0}
    monitor, states = run({A: FULL, B: half, C: EMPTY})
    assert states[A][-1] == "firing" and states[C][-1] == "-"
    f = next(f for f in monitor.endpoints[A].findings if f.rule == "replica-imbalance")
    assert "on http://c:8000" in f.summary
    assert monitor.endpoints[C].store.context[replicas.PEER] == B  # the emptiest *other* one


def test_different_models_a_single_replica_unknown_models_and_light_load_do_not_fire() -> None:
    other = {A: (MODEL,), B: ("another/model",)}
    monitor, states = run({A: FULL, B: EMPTY}, models=other)
    assert set(states[A]) == {"-"}
    assert measure(monitor, A, "replica_kv_spread") is None  # unknown, not 0
    monitor, states = run({A: FULL})
    assert set(states[A]) == {"-"} and measure(monitor, A, "replica_kv_spread") is None
    _, states = run({A: FULL, B: EMPTY}, models={A: (), B: ()})  # /v1/models unreadable
    assert set(states[A]) == {"-"}
    light = {"kv": 0.3, "running": 4.0, "waiting": 0.0}
    _, states = run({A: light, B: {"kv": 0.05, "running": 1.0, "waiting": 0.0}})
    assert set(states[A]) == {"-"}  # 1 request against 4: nothing worth balancing
    _, states = run({A: FULL, B: FULL})
    assert set(states[A]) == set(states[B]) == {"-"}


def test_once_firing_it_holds_in_the_recovery_band_and_then_clears_once() -> None:
    # 200 s far apart, 200 s 12 points apart (between the clear level, 10, and the firing
    # level, 15) with the batches level, then 200 s level: it fires, holds, clears, no flapping
    band_a, band_b = {"kv": 0.24, "running": 10.0, "waiting": 1.0}, {**EMPTY, "running": 9.0}
    level = {"kv": 0.14, "running": 10.0, "waiting": 1.0}
    a = [FULL] * 200 + [band_a] * 200 + [level] * 200
    b = [EMPTY] * 200 + [band_b] * 400
    _, states = run({A: a, B: b}, polls=600)
    assert states[A][200:400] == ["firing"] * 200
    assert states[A][-1] == "-"
    runs = [x for i, x in enumerate(states[A]) if i == 0 or x != states[A][i - 1]]
    # pending from the first poll (evidence accruing, then `for`), firing, clear: once each
    assert runs == ["pending", "firing", "-"]
    _, fresh = run({A: band_a, B: band_b})  # the band alone never fires
    assert set(fresh[A]) == {"-"}


def test_a_dead_peer_is_not_an_idle_one() -> None:
    monitor = Monitor(engine=Engine.from_catalog(user=False))
    reader = PageReader()
    server = EndpointInfo(models=(MODEL,))
    for i in range(300):
        t = 1000.0 + i
        a = reader.read(page(FULL), endpoint=A, t=t, latency_s=0.01)
        if i == 0:
            a = replace(a, knobs=KNOBS, server=server)
        b = Scrape(B, t, error="connection refused", server=server if i == 0 else None)
        monitor.feed(Frame(t, (a, b)))
    assert not any(f.rule == "replica-imbalance" for f in monitor.endpoints[A].findings)
    assert measure(monitor, A, "replica_kv_spread") is None


def test_a_peer_that_queues_is_not_idle() -> None:
    # B is capped lower (its own budget-too-small): fewer running and less KV, but a queue
    capped = {"kv": 0.3, "running": 16.0, "waiting": 30.0}
    monitor, states = run({A: {"kv": 0.9, "running": 40.0, "waiting": 0.0}, B: capped})
    assert set(states[A]) == set(states[B]) == {"-"}
    assert measure(monitor, A, "replica_kv_spread") == 0.0  # A itself is the baseline
