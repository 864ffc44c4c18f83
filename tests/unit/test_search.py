"""The twin's search for the best setting (`vtop.whatif.search`).

On the shipped traces, read as vtop reads a server: the choice is the optimum of the twin's own
dense sweep under the goals (within the twin's resolution), and the goals are respected. With a
twin that predicts whatever hypothesis draws, the search never proposes what the rules forbid
(a raise of max_num_seqs while the KV cache is the wall, unless FP8 KV makes the room), picks
the most tokens/s among the configurations meeting the goals, and orders its alternatives. A
twin that cannot tell the candidates apart leaves the formula's value, marked unchecked.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Mapping
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtop.cli import shipped_traces
from vtop.knobs import KnobValue
from vtop.whatif.goals import SUSTAINED_PREEMPTION_PER_S, Goals
from vtop.whatif.predict import BAND_FLOOR, Band, Prediction, WhatIf, prepare
from vtop.whatif.search import MAX_TRIALS, Trial, kv_is_wall, search
from vtop.whatif.watched import read_trace

WINDOW_S = 300.0


def seats_in(changes: Mapping[str, KnobValue]) -> int:
    """The max_num_seqs a trial sets (every trial of these searches sets it)."""
    seats = changes["max_num_seqs"]
    assert isinstance(seats, int), changes
    return seats


@cache
def fitted(name: str) -> WhatIf:
    return prepare(read_trace(shipped_traces.resolve(name)), WINDOW_S)


def band(after: float, now: float = 1.0) -> Band:
    return Band(now, after, after * 0.9, after * 1.1)


def prediction(changes: Mapping[str, KnobValue], **after: float) -> Prediction:
    return Prediction(dict(changes), {k: band(v) for k, v in after.items()}, {}, "high")


# -- goals -----------------------------------------------------------------------------------


def test_the_default_goals_are_the_sweet_spot() -> None:
    goals = Goals()
    ok = prediction({}, generation_tokens_per_s=100, preemptions_per_s=0.0, itl_mean=1.4)
    assert goals.misses(ok) == ()
    preempting = prediction({}, generation_tokens_per_s=120, preemptions_per_s=0.5, itl_mean=1.0)
    assert goals.misses(preempting) == ("0.5 preemptions/s",)
    slow = prediction({}, generation_tokens_per_s=120, preemptions_per_s=0.0, itl_mean=1.6)
    assert goals.misses(slow) == ("ITL mean 1.6x today's",)
    assert Goals(allow_preemption=True).misses(preempting) == ()
    assert "no sustained preemption" in goals.describe()
    assert "preemption" not in Goals(allow_preemption=True).describe()


def test_a_bound_the_user_gave_needs_its_figure_predicted() -> None:
    no_latency = prediction({}, generation_tokens_per_s=100, preemptions_per_s=0.0)
    assert Goals().misses(no_latency) == ()  # the default ITL bound cannot be judged: skipped
    assert Goals(max_ttft_s=2.0).misses(no_latency) == ("TTFT p90 not predicted",)
    late = prediction({}, generation_tokens_per_s=100, preemptions_per_s=0.0, ttft_p90=3.0)
    assert Goals(max_ttft_s=2.0).misses(late) == ("TTFT p90 3s > 2s",)
    near = prediction({}, generation_tokens_per_s=100, preemptions_per_s=0.0, ttft_p90=1.95)
    assert Goals(max_ttft_s=2.0).misses(near) == ("TTFT p90 1.95s, too near 2s",)  # aims inside
    relative = {"tokens": 100.0, "preemptions": 0.0, "ttft": None}
    assert Goals().missed(**relative, itl=1.46, itl_today=1.0, unknown="", within=0.95) == (
        "ITL mean 1.46x today's, too near 1.5x",
    )
    measured = {"tokens": 100.0, "preemptions": 0.0, "itl": None, "itl_today": None}
    over = Goals(max_ttft_s=2.0).missed(**measured, ttft=2.05, unknown="", within=1.03)
    assert over == ()  # a measurement within its noise of the bound meets it
    assert Goals(max_itl_s=0.05).misses(prediction({}, generation_tokens_per_s=1)) == (
        "preemptions not predicted",
        "ITL mean not predicted",
    )


# -- on the shipped traces -------------------------------------------------------------------


def test_a_search_past_its_deadline_runs_the_formula_alone_and_says_so() -> None:
    # A report on a host that gives vtop little CPU: the search must not hold the report up.
    whatif = fitted("memory-ceiling")
    formula: dict[str, KnobValue] = {"kv_cache_dtype": "fp8", "max_num_seqs": 104}
    choice = search(whatif, formula, Goals(), kv_wall=True, deadline=time.monotonic() - 1)
    assert choice.cut_short and len(choice.trials) == 1, choice.trials
    assert choice.chosen is choice.formula and "cut short" in choice.line()
    unhurried = search(whatif, formula, Goals(), kv_wall=True, deadline=time.monotonic() + 600)
    assert not unhurried.cut_short and len(unhurried.trials) > 1


def test_on_the_kv_bound_trace_the_choice_is_the_dense_sweeps_optimum() -> None:
    whatif = fitted("memory-ceiling")
    formula: dict[str, KnobValue] = {"kv_cache_dtype": "fp8", "max_num_seqs": 104}
    goals = Goals()
    choice = search(whatif, formula, goals, kv_wall=True)
    assert choice.checked and len(choice.trials) <= MAX_TRIALS
    assert choice.chosen.meets, choice.chosen.misses
    sweep = [Trial(c, p, goals.misses(p)) for c, p in dense(whatif, formula)]
    best = max(t.tokens or 0 for t in sweep if t.meets)
    assert (choice.chosen.tokens or 0) >= best * (1 - BAND_FLOOR), (choice.chosen, best)
    today = whatif.args.max_num_seqs
    assert today is not None
    for t in choice.trials:  # the KV wall: no raise without FP8 KV
        assert t.changes.get("kv_cache_dtype") == "fp8" or seats_in(t.changes) <= today
    # Without FP8 the best plain setting is shown beside the choice, with its cost.
    plain = [a for a in choice.alternatives if "kv_cache_dtype" not in a.changes]
    assert plain and plain[0].meets and (plain[0].tokens or 0) < (choice.chosen.tokens or 0)


def test_an_fp8_cache_alone_is_searched_with_seats_around_todays() -> None:
    """The memory-ceiling rule on a server whose pool fits today's seats twice over with FP8
    recommends the cache alone (the real KV-exhausted server on an AVX-512 CPU did): the search
    still scans the seats it may hold, fewer and more, where it ran the formula and today's."""
    whatif = fitted("memory-ceiling")
    today = whatif.args.max_num_seqs
    assert today is not None
    choice = search(whatif, {"kv_cache_dtype": "fp8"}, Goals(), kv_wall=True)
    with_fp8 = [t for t in choice.trials if t.changes.get("kv_cache_dtype") == "fp8"]
    seats = {seats_in(t.changes) for t in with_fp8 if "max_num_seqs" in t.changes}
    assert len(choice.trials) > 2 and today not in seats, choice.trials
    assert min(seats) < today < max(seats), seats
    assert all(t in with_fp8 or t.changes == {"kv_cache_dtype": "auto"} for t in choice.trials)


def test_a_pinned_pool_is_doubled_only_beside_the_fp8_cache() -> None:
    """A pool pinned by --num-gpu-blocks-override: the formula doubles its blocks with the FP8
    cache (the same memory); the seats searched without FP8 keep today's pool, never twice its
    blocks in the wider dtype (twice the memory, which the server may not have)."""
    whatif = dataclasses.replace(fitted("memory-ceiling"), pool_pinned=True)
    blocks = whatif.args.num_gpu_blocks_override
    assert blocks is not None
    formula: dict[str, KnobValue] = {
        "kv_cache_dtype": "fp8",
        "num_gpu_blocks_override": 2 * blocks,
        "max_num_seqs": 104,
    }
    choice = search(whatif, formula, Goals(), kv_wall=True)
    plain = [t for t in choice.trials if t.changes.get("kv_cache_dtype") != "fp8"]
    assert len(plain) > 1, choice.trials
    for t in plain:
        assert t.changes.get("num_gpu_blocks_override", blocks) == blocks, t.changes


def dense(
    whatif: WhatIf, formula: Mapping[str, KnobValue]
) -> list[tuple[dict[str, KnobValue], Prediction]]:
    """Every eighth max_num_seqs value from 8 to 160, with the formula's other knobs."""
    out = []
    for seats in range(8, 161, 8):
        changes = {**formula, "max_num_seqs": seats}
        out.append((changes, whatif.predict(changes)))
    return out


def test_on_the_budget_bound_trace_the_raise_is_chosen_by_the_curve() -> None:
    whatif = fitted("budget-too-small")
    today = whatif.args.max_num_seqs
    assert today is not None
    formula: dict[str, KnobValue] = {"max_num_seqs": today * 2}
    choice = search(whatif, formula, Goals(), kv_wall=False)
    assert choice.checked and choice.chosen.meets
    tokens = [t.tokens or 0 for t in choice.trials if t.meets]
    assert choice.chosen.tokens == max(tokens) or not choice.moved
    assert seats_in(choice.chosen.changes) > today  # it is a raise that pays


def test_a_twin_the_self_check_distrusts_does_not_choose() -> None:
    whatif = fitted("memory-ceiling")
    low = dataclasses.replace(whatif, check=dataclasses.replace(whatif.check, confidence="low"))
    formula: dict[str, KnobValue] = {"max_num_seqs": 48}
    choice = search(low, formula, Goals(), kv_wall=True)
    assert not choice.checked and not choice.moved and len(choice.trials) == 1
    assert choice.note.startswith("not checked by the twin")


def test_a_gain_inside_the_twins_error_keeps_the_formulas_value() -> None:
    whatif = fitted("memory-ceiling")
    formula: dict[str, KnobValue] = {"max_num_seqs": 48}

    def flat(changes: Mapping[str, KnobValue]) -> Prediction:
        seats = seats_in(changes)  # from 48 to today's 256 seats, 5 % more: under the floor
        return prediction(changes, generation_tokens_per_s=100 + seats / 40, preemptions_per_s=0.0)

    choice = search(whatif, formula, Goals(), kv_wall=False, run=flat)
    assert choice.checked and not choice.moved
    assert "the twin's own error" in choice.note


def test_when_every_other_value_misses_the_goals_the_twin_keeps_todays() -> None:
    """Budget-bound, but any wider batch slows every token past the ITL bound (a compute-bound
    CPU): the choice is today's value, the finding recommends no knob, and the refused raise
    is shown as the trade-off it is."""
    whatif = fitted("budget-too-small")
    today = whatif.args.max_num_seqs
    assert today is not None
    formula: dict[str, KnobValue] = {"max_num_seqs": today * 4}

    def compute_bound(changes: Mapping[str, KnobValue]) -> Prediction:
        seats = seats_in(changes)  # more tokens/s with seats, and twice the ITL above today's
        p = prediction(changes, generation_tokens_per_s=10.0 * seats, preemptions_per_s=0.0)
        slow = 1.0 if seats <= today else 2.0
        itl = Band(1.0, slow, slow, slow)
        return dataclasses.replace(p, figures={**p.figures, "itl_mean": itl})

    choice = search(whatif, formula, Goals(), kv_wall=False, run=compute_bound)
    assert choice.checked and choice.keeps_today
    assert seats_in(choice.chosen.changes) == today
    assert choice.note.startswith("today's configuration")
    assert choice.alternatives and all(seats_in(t.changes) > today for t in choice.alternatives)
    assert all(t.misses for t in choice.alternatives)  # each refused for a goal it misses
    raises = [t for t in choice.trials if seats_in(t.changes) > today]
    assert raises and all(any("ITL mean 2x" in m for m in t.misses) for t in raises)


def test_a_raise_is_never_turned_into_a_cut_even_when_no_raise_meets_the_goals() -> None:
    """A latency bound today's server already misses, on a budget-bound server: a narrower
    batch would meet it, but a budget finding that recommends fewer seats contradicts its own
    words (the batch is at its cap). The search stays on the raise's side, finds none that
    meets the bound, and says so beside the formula's value."""
    whatif = fitted("budget-too-small")
    today = whatif.args.max_num_seqs
    assert today is not None
    formula: dict[str, KnobValue] = {"max_num_seqs": today * 4}
    itl_today = whatif.predict({}).figures["itl_mean"].now
    choice = search(whatif, formula, Goals(max_itl_s=0.8 * itl_today), kv_wall=False)
    assert choice.checked and not choice.moved and not choice.chosen.meets
    assert all(seats_in(t.changes) >= today for t in choice.trials), choice.trials
    assert choice.note.startswith("none of") and "this one: ITL mean" in choice.note


def test_kv_is_the_wall_on_the_finding_or_on_the_figures() -> None:
    assert kv_is_wall({}, "memory-ceiling")
    assert kv_is_wall({"kv_usage": 0.97, "preemptions_per_s": 1.0}, "ttft-queueing")
    assert not kv_is_wall({"kv_usage": 0.97, "preemptions_per_s": 0.0}, "ttft-queueing")


# -- whatever the twin says ------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), kv_wall=st.booleans(), fp8=st.booleans(), allow=st.booleans()
)
def test_the_search_holds_the_rules_and_the_goals_whatever_the_twin_says(
    seed: int, kv_wall: bool, fp8: bool, allow: bool
) -> None:
    whatif = fitted("memory-ceiling")
    today = whatif.args.max_num_seqs
    assert today is not None
    rng = random.Random(seed)
    drawn: dict[tuple[tuple[str, str], ...], Prediction] = {}

    def anything(changes: Mapping[str, KnobValue]) -> Prediction:
        key = tuple(sorted((k, str(v)) for k, v in changes.items()))
        preempt = rng.choice([0.0, 0.0, rng.uniform(0, 3)])
        return drawn.setdefault(
            key,
            prediction(
                changes,
                generation_tokens_per_s=rng.uniform(1, 2000),
                preemptions_per_s=preempt,
                itl_p50=rng.uniform(0.5, 2.0),
            ),
        )

    formula: dict[str, KnobValue] = {"max_num_seqs": rng.randint(1, 300)}
    if fp8:
        formula["kv_cache_dtype"] = "fp8"
    goals = Goals(allow_preemption=allow)
    choice = search(whatif, formula, goals, kv_wall=kv_wall, run=anything)
    assert len(choice.trials) <= MAX_TRIALS
    assert choice.trials[0].changes == formula
    if kv_wall:
        for t in choice.trials:
            raised = seats_in(t.changes) > today
            assert not raised or t.changes.get("kv_cache_dtype") == "fp8" or t is choice.formula
    if not fp8:  # every candidate moves the way the formula does, or stays at today's
        way = seats_in(formula) - today
        assert all((seats_in(t.changes) - today) * way >= 0 for t in choice.trials), choice
    meeting = [t.tokens or 0 for t in choice.trials if t.meets]
    if choice.moved:
        assert choice.chosen.meets and choice.chosen.tokens == max(meeting)
        if choice.formula.meets:  # else the formula's misses a goal the choice meets
            assert (choice.chosen.tokens or 0) > (choice.formula.tokens or 0)
    elif meeting and choice.formula.meets:
        assert max(meeting) <= (choice.formula.tokens or 0) * (1 + BAND_FLOOR) + 1e-9
    if not allow and choice.chosen.meets:
        preempt = choice.chosen.prediction.figures["preemptions_per_s"].after
        assert preempt <= SUSTAINED_PREEMPTION_PER_S
    tokens = [a.tokens or 0 for a in choice.alternatives]
    assert tokens == sorted(tokens, reverse=True) and choice.chosen not in choice.alternatives


@pytest.mark.parametrize("name", ["memory-ceiling", "budget-too-small"])
def test_a_search_stays_within_its_trials_on_the_real_twin(name: str) -> None:
    whatif = fitted(name)
    seats = whatif.args.max_num_seqs or 16
    choice = search(whatif, {"max_num_seqs": seats}, Goals(), kv_wall=False)
    assert 1 < len(choice.trials) <= MAX_TRIALS
    assert len({tuple(sorted(t.changes.items())) for t in choice.trials}) == len(choice.trials)


# -- what the reports say --------------------------------------------------------------------


def test_every_report_format_shows_the_choice_its_goals_and_the_trade_offs() -> None:
    # The KV-bound trace, with the user's goals (an ITL bound): the JSON carries each
    # alternative with its predicted figures, and every format says how the value was
    # chosen, under which goals, and what each alternative would trade.
    import html as html_lib
    import re

    from vtop.report import render
    from vtop.report.run import replay_document

    goals = Goals(max_itl_s=1.0)
    doc = replay_document(str(shipped_traces.resolve("memory-ceiling")), goals=goals)
    (finding,) = [f for f in doc["findings"] if f["rule"] == "memory-ceiling"]
    prediction = finding.get("prediction")
    assert prediction is not None
    search_doc = prediction["search"]
    assert search_doc["checked"] and search_doc["goals"] == goals.describe()
    assert search_doc["tried"] <= MAX_TRIALS
    alternatives = [a for r in finding["recommendations"] for a in r.get("alternatives", [])]
    assert alternatives, finding["recommendations"]
    for a in alternatives:
        assert a["flags"].startswith("--") and "generation_tokens_per_s" in a["predicted"]
    for fmt in ("text", "markdown", "html"):
        out = " ".join(html_lib.unescape(re.sub("<[^>]+>", "", render(doc, fmt))).split())
        assert f"goals: {goals.describe()}" in out, fmt
        for a in alternatives:
            assert " ".join(a["line"].split()) in out, (fmt, a["line"])
