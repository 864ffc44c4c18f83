"""The finding detail's predicted effect: shown at once as running, the twin off the loop, then
its line; and the rows it turns an `Advice` into, without Textual."""

from __future__ import annotations

import threading
from dataclasses import replace

from tests.ui.scripted import build_sim_app
from vtop.model import Finding, Knob, Recommendation, Severity
from vtop.monitor import Monitor
from vtop.ui.prediction import Predicted, Predictor
from vtop.ui.screens.finding import DetailBody, FindingScreen
from vtop.ui.views import detail
from vtop.whatif.advice import Advice
from vtop.whatif.goals import Goals
from vtop.whatif.predict import Band, Prediction
from vtop.whatif.search import Choice, Trial

SIZE = (100, 40)


def _body(app: object) -> str:
    screen = getattr(app, "screen", None)
    assert isinstance(screen, FindingScreen)
    return " ".join(str(screen.query_one(DetailBody).render()).split())


async def test_the_root_cause_shows_running_then_the_twin_s_prediction() -> None:
    goals = Goals(max_itl_s=0.5, allow_preemption=True)
    app = build_sim_app("budget-too-small", findings=None, goals=goals)
    threads: list[str] = []
    go = threading.Event()
    real = Predictor._run

    def spy(self: Predictor, finding: Finding, reading: object) -> Predicted:
        # Held until the test has seen the screen drawn and answering keys: were the twin on
        # the loop, the screen could not show "running" while it waits here.
        threads.append(threading.current_thread().name)
        go.wait(30)
        return real(self, finding, reading)  # type: ignore[arg-type]

    Predictor._run = spy  # type: ignore[method-assign]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("enter")
            assert isinstance(app.screen, FindingScreen)
            assert app.screen.finding.rule == "budget-too-small"
            await pilot.pause(0.1)
            first = _body(app)
            assert "Predicted effect: running the twin…" in first, first
            await pilot.press("c")  # the loop answers keys while the twin runs
            assert app.clipboard == "--max-num-seqs 64"
            assert threads and threads[0] != threading.main_thread().name, threads
            go.set()
            for _ in range(300):
                await pilot.pause(0.05)
                body = _body(app)
                if "running the twin" not in body:
                    break
            after = body.split("Predicted effect", 1)[1]
            assert "gen tok/s" in after and "confidence" in after, body
            # How the value was chosen, under the goals the app was given (--max-itl-ms 500
            # --allow-preemption), as the reports say it.
            assert "chosen: " in after and f"goals: {goals.describe()}" in after, body
            assert "no sustained preemption" not in after, body
            # A second look at the same finding, same load: the Advisor's answer, at once.
            await pilot.press("escape")
            await pilot.press("enter")
            await pilot.pause(0.2)
            assert "gen tok/s" in _body(app).split("Predicted effect", 1)[1]
    finally:
        go.set()
        Predictor._run = real  # type: ignore[method-assign]


def _finding() -> Finding:
    rec = Recommendation("max_num_seqs", Knob("max_num_seqs", 16, "process"), 64, "raise", "x4", {})
    return Finding(
        "budget-too-small", "t", "http://e", Severity.WARNING, "firing", "s", recommendations=(rec,)
    )


def test_advice_rows_say_the_line_and_the_demotion() -> None:
    band = Band(now=100.0, after=104.0, low=100.0, high=108.0)
    p = Prediction({"max_num_seqs": 64}, {"generation_tokens_per_s": band}, {}, "medium", "")
    backed = detail.prediction_rows(Advice("r", p, "generation_tokens_per_s", 0.5))
    assert [r.text for r in backed[:2]] == ["", "Predicted effect"]
    assert backed[2].text.startswith("  gen tok/s 100 → 104 (+4%, ±4%)")
    assert backed[2].text.endswith("(confidence medium)") and len(backed) == 3
    demoted = detail.prediction_rows(Advice("r", p, "generation_tokens_per_s", 0.04, "load"))
    assert demoted[-1].text.startswith("  but the twin predicts gen tok/s 100 → 104")
    assert demoted[-1].text.endswith("; load")
    assert detail.prediction_rows(None) == []


def test_no_store_is_one_line_that_says_so() -> None:
    started = Predictor().start(Monitor(), _finding())
    assert isinstance(started, Predicted)
    rows = started.rows
    assert [r.text for r in rows][1].startswith("Predicted effect: prediction unavailable: ")
    assert "no polls of http://e" in rows[1].text
    nothing = Finding("x", "t", "http://e", Severity.WARNING, "firing", "s")
    assert Predictor().start(Monitor(), nothing) == Predicted([], nothing), "no knob: no block"


def test_the_prediction_comes_before_the_evidence() -> None:
    rows = detail.rows(_finding(), None)
    block = detail.unavailable_rows("why")
    texts = [r.text for r in detail.with_prediction(rows, block)]
    at = texts.index("Evidence")
    assert texts[at - 3 : at] == ["", "Predicted effect: prediction unavailable: why", ""]
    assert detail.with_prediction(rows, []) == rows
    bare = [detail.Row("summary")]
    assert [r.text for r in detail.with_prediction(bare, block)] == [
        "summary",
        *[r.text for r in block],
    ]


async def test_the_twin_s_choice_is_what_every_view_shows_and_copies() -> None:
    """The demo's budget-too-small: the formula gives 64, the twin chooses fewer seats under
    the default goals (ITL no more than 1.5x today's). Once it has, the detail's Change box,
    `c`, and the triage panel say the twin's value, never one value beside a prediction for
    another; a second look asks the twin about the formula's value again, not its own."""
    app = build_sim_app("budget-too-small", findings=None)
    asked: list[tuple[str, ...]] = []
    real = Predictor._run

    def spy(self: Predictor, finding: Finding, reading: object) -> Predicted:
        asked.append(tuple(r.flag for r in finding.recommendations))
        return real(self, finding, reading)  # type: ignore[arg-type]

    Predictor._run = spy  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(120, 60)) as pilot:
            await pilot.pause()
            await pilot.press("enter")
            for _ in range(300):
                await pilot.pause(0.05)
                if "running the twin" not in _body(app):
                    break
            body = _body(app)
            assert "the twin's choice: --max-num-seqs " in body, body
            chosen = body.split("the twin's choice: ", 1)[1].split()[:2]
            flag = " ".join(chosen)
            assert flag != "--max-num-seqs 64", body
            change = body.split("Change", 1)[1].split("Predicted effect", 1)[0]
            assert flag in change and "chosen by the twin over the formula's 64" in change, body
            assert "formula min(" not in change, change
            await pilot.press("c")
            assert app.clipboard == flag
            await pilot.press("escape")
            await pilot.pause()
            triage = " ".join(line.text for line in app.triage.lines)
            assert flag in triage and "--max-num-seqs 64" not in triage, triage
            await pilot.press("c")
            assert app.clipboard == flag
            await pilot.press("enter")
            await pilot.pause(0.2)
            assert asked == [("--max-num-seqs 64",), ("--max-num-seqs 64",)], asked
            assert flag in _body(app).split("Change", 1)[1]
    finally:
        Predictor._run = real  # type: ignore[method-assign]


def _choosing(value: int) -> Advice:
    """The twin's answer to `_finding()`: it chose `value` seats over the formula's."""
    band = Band(now=100.0, after=150.0, low=140.0, high=160.0)

    def trial(seats: int) -> Trial:
        p = Prediction({"max_num_seqs": seats}, {"generation_tokens_per_s": band}, {}, "high", "")
        return Trial({"max_num_seqs": seats}, p, ())

    formula, chosen = trial(64), trial(value)
    choice = Choice(Goals(), formula, chosen, (formula,), True, "", (formula, chosen))
    return Advice("budget-too-small", chosen.prediction, "generation_tokens_per_s", 0.5, "", choice)


def test_the_twin_s_choice_stays_while_the_formula_s_value_moves_with_the_load() -> None:
    """The rule's formula follows the load (64 seats, then 72 a few polls later); the twin's
    choice (37) holds for as long as the rule asks for the same move, and says the formula's
    value of the moment. A rule that stops asking for it drops the choice."""
    predictor = Predictor()
    asked = _finding()
    predictor._advice[(asked.endpoint, asked.rule)] = ((("max_num_seqs", "raise"),), _choosing(37))
    (rec,) = predictor.shown(asked).recommendations
    assert rec.flag == "--max-num-seqs 37" and rec.formula_value == 64
    moved = replace(asked, recommendations=(replace(asked.recommendations[0], new_value=72),))
    shown = predictor.shown(moved)
    (rec,) = shown.recommendations
    assert rec.flag == "--max-num-seqs 37" and rec.formula_value == 72, rec
    assert predictor.formula(shown) == moved, "the twin is asked about the formula's 72"
    lowered = replace(moved.recommendations[0], new_value=8, direction="lower")
    other = replace(moved, recommendations=(lowered,))
    assert predictor.shown(other) == other
