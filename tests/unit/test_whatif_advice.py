"""What a finding's advice will buy (`vtop.whatif.advice`), on the simulator's scenarios read
as vtop reads a server: a raise of max_num_seqs on the budget-bound server is predicted to pay
and is not demoted; the same raise on a server whose batch is not at its cap is demoted, with
what limits it instead; the advisor keeps a prediction until the workload or the advice moves;
a configuration the twin cannot start is a withheld prediction, not an error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from tests.simtools.polled import polled
from tests.unit.test_whatif_predict import warm
from vtop.knobs import KnobValue
from vtop.model import Finding, Knob, Recommendation, Severity
from vtop.sim.scenarios import get_scenario
from vtop.sim.twin import Twin
from vtop.whatif.advice import (
    MIN_GAIN,
    Advice,
    Advisor,
    advise,
    chosen_recommendations,
    twin_changes,
)
from vtop.whatif.check import SelfCheck
from vtop.whatif.goals import Goals
from vtop.whatif.predict import Band, Prediction, WhatIf, prepare
from vtop.whatif.search import Choice, Trial
from vtop.whatif.watched import Watched

WINDOW_S = 240.0
ROOT = Path(__file__).resolve().parents[2]


def predict(advisor: Advisor, finding: Finding, watched: Watched) -> Advice | None:
    """Read the store and run the twin, as the report does (both on this thread)."""
    return advisor.advise(finding, Advisor.read(watched, WINDOW_S))


def raise_seqs(endpoint: str, knobs: Mapping[str, Knob], to: int) -> Finding:
    rec = Recommendation("max_num_seqs", knobs.get("max_num_seqs"), to, "raise", "", {})
    return Finding(
        "budget-too-small",
        "Budget too small",
        endpoint,
        Severity.WARNING,
        "firing",
        "at the cap",
        recommendations=(rec,),
    )


@pytest.fixture(scope="module")
def budget() -> Watched:
    return polled(warm(), WINDOW_S)


@pytest.fixture(scope="module")
def healthy() -> Watched:
    twin = Twin(get_scenario("healthy"), seed=3, epoch=0.0)
    twin.warm_up()
    return polled(twin, WINDOW_S)


def test_a_raise_on_the_budget_bound_server_is_predicted_to_pay(
    budget: Watched,
) -> None:
    store, knobs = budget.store, budget.knobs
    finding = raise_seqs(store.endpoint, knobs, 64)
    advice = predict(Advisor(), finding, budget)
    assert advice is not None and advice.promised == "generation_tokens_per_s"
    assert advice.gain is not None and advice.gain > 0.5, advice
    assert not advice.demoted and advice.verdict() == ""
    band = advice.prediction.figures["generation_tokens_per_s"]
    assert band.low < band.after < band.high and band.after > band.now * 1.5
    assert advice.line().startswith("gen tok/s ") and "queue p50" in advice.line()


def test_the_same_raise_where_the_cap_does_not_bind_is_demoted_and_says_why(
    healthy: Watched,
) -> None:
    store, knobs = healthy.store, healthy.knobs
    cap = knobs["max_num_seqs"].value
    assert isinstance(cap, int)
    advice = predict(Advisor(), raise_seqs(store.endpoint, knobs, cap * 2), healthy)
    assert advice is not None and advice.gain is not None
    assert abs(advice.gain) < MIN_GAIN and advice.demoted, advice
    verdict = advice.verdict()
    assert "this change alone will not fix it" in verdict
    assert "the load limits it" in verdict, verdict


def test_the_advisor_keeps_a_prediction_until_the_advice_or_the_knobs_change(
    budget: Watched,
) -> None:
    store, knobs = budget.store, budget.knobs
    advisor = Advisor()
    first = predict(advisor, raise_seqs(store.endpoint, knobs, 64), budget)
    fit = advisor.fitted(store.endpoint)
    again = predict(advisor, raise_seqs(store.endpoint, knobs, 64), budget)
    assert again is first and advisor.fitted(store.endpoint) is fit
    other = predict(advisor, raise_seqs(store.endpoint, knobs, 32), budget)
    assert other is not first and advisor.fitted(store.endpoint) is fit  # the same fit
    moved = {**knobs, "max_num_batched_tokens": Knob("max_num_batched_tokens", 4096, "process")}
    predict(advisor, raise_seqs(store.endpoint, moved, 64), replace(budget, knobs=moved))
    assert advisor.fitted(store.endpoint) is not fit  # another configuration: a new fit


def test_a_configuration_the_twin_cannot_start_is_withheld_with_its_reason(
    budget: Watched,
) -> None:
    store, knobs = budget.store, budget.knobs
    whatif: WhatIf = prepare(budget, WINDOW_S)
    rec = Recommendation("block_size", knobs.get("block_size"), 0, "set", "", {})
    finding = Finding(
        "r", "t", store.endpoint, Severity.WARNING, "firing", "s", recommendations=(rec,)
    )
    advice = advise(finding, whatif, twin_changes(finding))
    assert advice.prediction.confidence == "withheld" and not advice.prediction.figures
    assert advice.line().startswith("prediction withheld: ") and advice.gain is None
    assert not advice.demoted


def test_only_the_knobs_the_twin_can_set_are_run() -> None:
    recs = (
        Recommendation("max_num_seqs", None, 64, "raise", "", {}),
        Recommendation("tensor_parallel_size", None, 2, "raise", "", {}),
        Recommendation("kv_cache_dtype", None, "fp8", "set", "", {}),
    )
    finding = Finding("r", "t", "e", Severity.WARNING, "firing", "s", recommendations=recs)
    assert twin_changes(finding) == {"max_num_seqs": 64, "kv_cache_dtype": "fp8"}


def test_a_knob_only_the_twins_choice_sets_says_its_value_today() -> None:
    """An FP8 cache recommended alone, the twin's choice adding 12 seats: the seats' line reads
    "up from 8" (the server's own), not "now -, assumed" as a knob nobody read."""
    fp8 = Recommendation(
        "kv_cache_dtype", Knob("kv_cache_dtype", "auto", "metrics"), "fp8", "set", "", {}
    )
    finding = Finding(
        "ttft-queueing", "t", "e", Severity.WARNING, "firing", "s", recommendations=(fp8,)
    )
    seats = Knob("max_num_seqs", 8, "process", "pid 1 command line --max-num-seqs")

    def trial(changes: dict[str, KnobValue]) -> Trial:
        return Trial(changes, Prediction(changes, {}, {}, "high"), ())

    formula, chosen = (
        trial({"kv_cache_dtype": "fp8"}),
        trial({"kv_cache_dtype": "fp8", "max_num_seqs": 12}),
    )
    choice = Choice(Goals(), formula, chosen, (formula,), True, "the best of 2", (formula, chosen))
    advice = Advice(
        "ttft-queueing", chosen.prediction, None, None, choice=choice, knobs={"max_num_seqs": seats}
    )
    recs = {r.knob: r for r in chosen_recommendations(finding, advice)}
    assert recs["kv_cache_dtype"] is fp8
    added = recs["max_num_seqs"]
    assert added.current is seats and added.direction == "raise" and added.change == "up from 8"
    unread = replace(advice, knobs={})
    assert chosen_recommendations(finding, unread)[-1].current is None  # nothing read: none said


def test_the_report_predicts_within_its_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from vtop.report import collect
    from vtop.report.run import replay_document

    trace = str(ROOT / "traces" / "budget-too-small.vtrace")
    doc = replay_document(trace)
    top = next(f for f in doc["findings"] if f["counts"])
    assert top["prediction"] is not None and top["prediction"]["line"].startswith("gen tok/s")
    assert top["recommendations"][0]["predicted"]["generation_tokens_per_s"]["after"] > 0
    assert doc["prediction_check"] is not None
    monkeypatch.setattr(collect, "PREDICT_BUDGET_S", -1.0)  # spent before it began
    spent = replay_document(trace)
    assert all(f.get("prediction") is None for f in spent["findings"])
    assert spent["prediction_check"] is None


def test_a_twin_that_raises_costs_the_finding_its_prediction_not_the_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vtop.report.run import replay_document

    def broken(self: Advisor, finding: Finding, reading: object, **kw: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Advisor, "advise", broken)
    doc = replay_document(str(ROOT / "traces" / "budget-too-small.vtrace"))
    top = next(f for f in doc["findings"] if f["counts"])
    assert doc["status"] == "WARNING" and top["rule"] == "budget-too-small"
    prediction = top["prediction"]
    assert prediction is not None and prediction["confidence"] == "withheld"
    assert prediction["line"] == "prediction withheld: the twin failed (RuntimeError: boom)"
    assert "predicted" not in top["recommendations"][0]


class _Fixed:
    """A fitted twin that predicts what it is given (for the demotion's wording); its
    self-check's confidence is low, so the search runs the formula's configuration alone."""

    def __init__(self, bands: dict[str, Band]) -> None:
        self.bands = bands
        self.check = SelfCheck({}, {}, {}, "low", "")

    def predict(self, changes: Mapping[str, object]) -> Prediction:
        return Prediction(dict(changes), self.bands, {}, "high")  # type: ignore[arg-type]


def test_a_demoted_fix_for_preemptions_names_the_pool_that_still_fills() -> None:
    rec = Recommendation("kv_cache_dtype", None, "fp8", "set", "", {})
    finding = Finding(
        "memory-ceiling", "t", "e", Severity.CRITICAL, "firing", "s", recommendations=(rec,)
    )
    twin = _Fixed(
        {"preemptions_per_s": Band(2.0, 1.9, 1.8, 2.0), "kv_usage": Band(0.99, 0.98, 0.93, 1.0)}
    )
    advice = advise(finding, cast(WhatIf, twin), twin_changes(finding))
    assert advice.promised == "preemptions_per_s" and advice.demoted
    assert advice.gain == pytest.approx(0.05)
    assert advice.verdict() == (
        "the twin predicts preemptions/s 2 → 1.9 (5% better): under 10%, this change alone "
        "will not fix it; the KV pool still fills (KV usage 98.0% after): this load needs more "
        "room than the change makes"
    )


def test_a_today_the_twin_misses_is_shown_beside_what_the_server_showed() -> None:
    """The twin's today is its steady state at today's knobs; where the server showed
    another (its queue still filling), the line says both, and the percentage stays the
    twin's own change. Within the narrowest band the twin's today stands alone."""
    rec = Recommendation("max_num_batched_tokens", None, 8192, "raise", "", {})
    finding = Finding(
        "prefill-bound", "t", "e", Severity.WARNING, "firing", "s", recommendations=(rec,)
    )
    twin = _Fixed(
        {
            "ttft_p50": Band(20.0, 4.0, 3.6, 4.4, seen=14.5),
            "ttft_p90": Band(38.0, 7.25, 6.5, 8.0, seen=36.0),
            "generation_tokens_per_s": Band(100.0, 101.0, 91.0, 111.0, seen=None),
            "preemptions_per_s": Band(1.2, 0.0167, 0.0, 0.1167, seen=1.3),
        }
    )
    line = advise(finding, cast(WhatIf, twin), twin_changes(finding)).line()
    assert "TTFT p50 20s (seen 14.5s) → 4s (-80%" in line
    assert "TTFT p90 38s → 7.25s (-81%" in line  # 5 % apart: inside the band
    assert "gen tok/s 100 → 101" in line and line.count("seen") == 1
    # a band its floor sets (wider than the value) says where it ends, not "±600%"
    assert "preemptions/s 1.2 → 0.0167 (-99%, up to 0.117)" in line


def test_tokens_and_itl_are_predicted_from_what_the_server_showed(budget: Watched) -> None:
    """The step law's figures start from the server's today and move by the twin's change;
    the queue's stay the twin's, with the server's beside them."""
    whatif = prepare(budget, WINDOW_S)
    prediction = whatif.predict({"max_num_seqs": 64})
    observed, twin = whatif.check.observed, whatif.check.twin
    for name in ("generation_tokens_per_s", "itl_mean"):
        band, seen, today = prediction.figures[name], observed[name], twin[name]
        after = prediction.twin_after[name]
        assert seen is not None and today is not None and after is not None
        assert band.now == band.seen == seen != today  # the twin is close, not exact
        assert band.after == pytest.approx(after * seen / today)
        assert band.low < band.after < band.high
    queue = prediction.figures["queue_p50"]
    assert queue.now == twin["queue_p50"] and queue.seen == observed["queue_p50"]
    assert queue.after == prediction.twin_after["queue_p50"]
