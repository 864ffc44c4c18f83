"""The engine's semantics: states, suppression, the two guarantees, restarts, the monitor."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from vtop.model import Finding, Frame, Knob, Scrape, SeriesKey
from vtop.monitor import Monitor
from vtop.signals.store import Store
from vtop.triage.engine import Engine
from vtop.triage.loader import load_catalog, load_text
from vtop.triage.schema import Rule

EP = "http://10.0.0.9:8000"


@dataclass
class View:
    store: Store
    knobs: dict[str, Knob] = field(default_factory=dict)


def scrape(t: float, **values: float) -> Scrape:
    scalars = {SeriesKey(k, "m", "0"): v for k, v in values.items()}
    return Scrape(EP, t, latency_s=0.01, size_bytes=100, scalars=scalars)


def rule(rid: str, order: int, direction: str, value: str, extra: str = "") -> str:
    return textwrap.dedent(f"""\
        id: {rid}
        title: {rid}
        severity: warning
        order: {order}
        requires: {{evidence: 1s}}
        when: {{max_over_time: running, window: 1m, above: 0}}
        summary: "{rid}"
        recommend:
          - {{knob: max_num_seqs, direction: {direction}, value: "{value}"}}
        """) + extra  # fmt: skip


def engine_of(*texts: str) -> Engine:
    rules: list[Rule] = []
    for i, text in enumerate(texts):
        loaded = load_text(text, f"r{i}.yaml")
        assert not loaded.errors, loaded.errors
        rules.extend(loaded.rules.values())
    return Engine(rules)


def run(
    engine: Engine, polls: int, knobs: dict[str, Knob] | None = None, **values: float
) -> list[Finding]:
    view = View(Store(EP), knobs or {"max_num_seqs": Knob("max_num_seqs", 64, "flag")})
    findings: list[Finding] = []
    for i in range(polls):
        view.store.ingest(scrape(float(i), **values))
        findings = engine.evaluate(view)
    return findings


def test_never_raise_and_lower_one_knob_at_once() -> None:
    engine = engine_of(rule("lower-it", 1, "lower", "32"), rule("raise-it", 2, "raise", "128"))
    findings = run(engine, 5, running=10, waiting=0, kv_usage=0.1)
    by = {f.rule: f for f in findings}
    assert [r.flag for r in by["lower-it"].recommendations] == ["--max-num-seqs 32"]
    assert by["raise-it"].recommendations == ()
    assert ("withheld", "raise max_num_seqs: lower-it gives opposite advice (lower)") in by[
        "raise-it"
    ].evidence


def test_never_raise_max_num_seqs_while_kv_is_the_wall() -> None:
    engine = engine_of(rule("raise-it", 1, "raise", "128"))
    roomy = run(engine_of(rule("raise-it", 1, "raise", "128")), 5, running=10, kv_usage=0.5)
    assert roomy[0].state == "firing"
    assert roomy[0].recommendations[0].engine_arg == "max_num_seqs=128"
    full = run(engine, 5, running=10, kv_usage=0.95)
    assert full[0].state == "suppressed"
    assert full[0].suppressed_by == "kv-wall"
    assert full[0].recommendations == ()


def test_a_firing_root_cause_suppresses_what_it_explains() -> None:
    cause = rule("cause", 1, "lower", "32", "explains: [symptom]\n")
    engine = engine_of(cause, rule("symptom", 2, "lower", "16"))
    by = {f.rule: f for f in run(engine, 5, running=10, kv_usage=0.1)}
    assert by["symptom"].state == "suppressed"
    assert by["symptom"].suppressed_by == "cause"
    assert by["cause"].state == "firing"


def test_pending_reports_progress_then_fires() -> None:
    text = rule("slow", 1, "lower", "32").replace("requires:", "for: 10s\nrequires:")
    engine = engine_of(text)
    view = View(Store(EP), {"max_num_seqs": Knob("max_num_seqs", 64, "flag")})
    states = []
    for i in range(15):
        view.store.ingest(scrape(float(i), running=5))
        f = engine.evaluate(view)[0]
        states.append((f.state, f.held_s, f.for_s))
    # 1 s of evidence, then 10 s of holding: the condition has held from the first poll, and
    # the rule says from then on that it fires at 11 s if it goes on holding.
    assert states[0] == ("pending", 0.0, 11.0)
    assert states[5] == ("pending", 5.0, 11.0)
    assert states[10][0] == "pending"
    assert states[11][0] == "firing"


def test_a_restart_resets_the_rules() -> None:
    engine = engine_of(rule("r", 1, "lower", "32").replace("evidence: 1s", "evidence: 4s"))
    view = View(Store(EP), {"max_num_seqs": Knob("max_num_seqs", 64, "flag")})
    for i in range(10):
        view.store.ingest(scrape(float(i), running=5, generation_tokens=100.0 * i))
    assert engine.evaluate(view)[0].state == "firing"
    view.store.ingest(scrape(10.0, running=5, generation_tokens=3.0))
    assert view.store.restarts() == [10.0]
    after = engine.evaluate(view)[0]
    assert (after.state, after.held_s, after.needs_s) == ("pending", 0.0, 4.0)


def test_assumed_inputs_lower_confidence_and_say_so() -> None:
    engine = engine_of(rule("r", 1, "lower", "max_num_seqs / 2"))
    knobs = {"max_num_seqs": Knob("max_num_seqs", 256, "default", "vLLM 0.32 default")}
    rec = run(engine, 5, knobs, running=5)[0].recommendations[0]
    assert rec.new_value == 128
    assert rec.confidence == "low"
    assert "vLLM 0.32 default" in rec.tradeoff
    assert rec.inputs["max_num_seqs"] == knobs["max_num_seqs"]


def test_monitor_runs_the_engine_on_every_scrape() -> None:
    monitor = Monitor(engine=Engine(load_catalog(user=False).rules.values()))
    knobs = {"max_num_seqs": Knob("max_num_seqs", 64, "flag"),
             "kv_capacity_tokens": Knob("kv_capacity_tokens", 200000, "metrics")}  # fmt: skip
    for i in range(240):
        s = scrape(float(i), running=64, waiting=100, kv_usage=0.5, preemptions=0)
        if i == 0:
            s = Scrape(EP, s.t, latency_s=0.01, size_bytes=100, scalars=s.scalars, knobs=knobs)
        monitor.feed(Frame(float(i), (s,)))
    findings = monitor.endpoints[EP].findings
    assert findings[0].rule == "budget-too-small"
    assert findings[0].state == "firing"
    assert findings[0].recommendations[0].flag == "--max-num-seqs 112"


def test_a_pending_line_does_not_vanish_on_a_lapse_of_a_poll_or_two() -> None:
    text = rule("slow", 1, "lower", "32").replace("requires:", "for: 30s\nrequires:")
    text = text.replace(
        "{max_over_time: running, window: 1m, above: 0}", "{last: running, above: 0}"
    )
    engine = engine_of(text)
    view = View(Store(EP), {"max_num_seqs": Knob("max_num_seqs", 64, "flag")})
    shown = []
    # running holds the condition (> 0) except at polls 5-6 (a 2 s lapse) and 20-29 (10 s)
    for i in range(40):
        lapse = i in (5, 6) or 20 <= i < 30
        view.store.ingest(scrape(float(i), running=0.0 if lapse else 5.0))
        found = [f for f in engine.evaluate(view) if f.rule == "slow"]
        shown.append(found[0].state if found else "-")
    assert shown[:20] == ["pending"] * 20, "a 2 s lapse keeps the line"
    assert shown[20:24] == ["pending"] * 4 and shown[24:30] == ["-"] * 6, "5 s without it: gone"
    assert shown[30] == "pending"


def test_a_fast_path_that_dips_for_a_poll_keeps_counting_down_on_that_path() -> None:
    """A rate over the first seconds of warm-up polls dips below a decisive threshold now and
    then: the time to the verdict keeps to the fast path's seconds, not the slow path's minutes
    (the likely cause on screen, the symptoms held back and a report's 'needs' read it)."""
    text = rule("fast", 1, "lower", "32").replace(
        "requires: {evidence: 1s}",
        "requires: {evidence: 60s}\nfor: 2m\n"
        "decisive: {evidence: 10s, when: {last: running, above: 10}}",
    )
    engine = engine_of(text)
    view = View(Store(EP), {"max_num_seqs": Knob("max_num_seqs", 64, "flag")})
    needs = []
    for i in range(8):
        view.store.ingest(scrape(float(i), running=5.0 if i == 4 else 20.0))
        (found,) = engine.evaluate(view)
        assert found.state == "pending"
        needs.append(found.needs_s)
    assert needs == [10.0 - i for i in range(8)], "one poll under the decisive line"
    for i in range(8, 14):  # then 6 s under it: the slow path's wait is what is left
        view.store.ingest(scrape(float(i), running=5.0))
        (found,) = engine.evaluate(view)
    assert found.needs_s is not None and found.needs_s > 60
