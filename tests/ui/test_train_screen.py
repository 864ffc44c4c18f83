"""Training on the replay screen, driven by Pilot: hidden findings, questions, grading, score.

The trace (budget-too-small.vtrace) has two incidents: ttft-queueing starts firing 3:00 in,
then budget-too-small, which explains it, 30 s later; both recommend --max-num-seqs 64. The
screen and the text quiz (`vtop.report.train_cli`) must grade the same answers the same.
"""

from __future__ import annotations

import io

from textual.pilot import Pilot
from textual.widgets import OptionList

from tests.ui.replaying import TRACE, build, catalog, pass_over
from vtop.report import train_cli
from vtop.ui.replay_app import ReplayApp
from vtop.ui.screens.question import QuestionScreen
from vtop.ui.screens.score import ScoreScreen
from vtop.ui.training import NO_KNOB

SIZE = (120, 40)


def questions() -> list[tuple[float, str]]:
    return [(q.t, q.finding.rule) for q in pass_over()[0].questions]


def rule_names() -> set[str]:
    return {c.rule for c in catalog()}


def triage_text(app: ReplayApp) -> str:
    return "\n".join(line.text for line in app.triage.lines)


async def pick(pilot: Pilot[None], label: str) -> None:
    """Highlight the option whose text starts with `label` and press Enter."""
    options = pilot.app.screen.query_one(OptionList)
    for i in range(options.option_count):
        if str(options.get_option_at_index(i).prompt).startswith(label):
            options.highlighted = i
            await pilot.press("enter")
            return
    raise AssertionError(f"no option {label!r}")


async def test_the_replay_stops_where_a_rule_starts_firing_and_asks() -> None:
    app = build(train=True)
    (t1, rule1), _ = questions()
    assert rule1 == "ttft-queueing"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not isinstance(app.screen, QuestionScreen)
        await pilot.press("n")
        assert app.player.position == t1 and not app.replay.playing
        assert isinstance(app.screen, QuestionScreen)
        options = app.screen.query_one(OptionList)
        offered = [str(options.get_option_at_index(i).id) for i in range(options.option_count)]
        assert set(offered) == rule_names(), "the whole catalog, not just this trace's rules"


async def test_findings_stay_hidden_while_training() -> None:
    app = build(train=True)
    times = list(pass_over()[0].questions)
    async with app.run_test(size=SIZE) as pilot:
        app.seek_to(times[0].t - 1.0)  # just before: the rules are about to fire
        await pilot.pause()
        text = triage_text(app)
        assert "training: findings stay hidden" in text
        assert not any(rule in text for rule in rule_names())
        assert app.timeline.text("note") == "n: next incident at 3:00"
        assert app.timeline.state is not None and app.timeline.state.hidden
        await pilot.press("c")
        assert app._findings(app.monitor, app.endpoint or "") == ()
        await pilot.press("enter")
        assert not isinstance(app.screen, QuestionScreen) or app.player.position == times[0].t


async def test_answer_right_then_wrong_then_the_score() -> None:
    app = build(train=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await pick(pilot, "ttft-queueing")
        await pick(pilot, "raise --max-num-seqs")
        screen = app.screen
        assert isinstance(screen, QuestionScreen) and screen.step == "reveal"
        revealed = str(screen.query_one("#question-answer").render())
        assert revealed.startswith("right: it was ttft-queueing")
        assert "you: ttft-queueing, raise --max-num-seqs" in revealed
        assert "4 of 4 points" in revealed and "change: --max-num-seqs 64" in revealed
        assert "Queueing share of TTFT" in revealed, "the evidence, as the rule saw it"
        await pilot.press("enter")
        assert not isinstance(app.screen, QuestionScreen)
        assert "1 of 2 incidents answered · 4 of 4 points" in triage_text(app)

        await pilot.press("n")  # the second incident
        assert isinstance(app.screen, QuestionScreen)
        await pick(pilot, "memory-ceiling")
        await pick(pilot, NO_KNOB[:20])
        revealed = str(app.screen.query_one("#question-answer").render())
        assert revealed.startswith("not quite: it was budget-too-small")
        assert "0 of 4 points" in revealed
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ScoreScreen)
        body = str(app.screen.query_one("#score-body").render())
        assert body.startswith("score 4 of 8: 1 of 2 diagnoses right")
        assert "you: memory-ceiling, no server knob" in body
        await pilot.press("enter")
        assert app.session is not None and app.session.done
        assert app.session.score.summary() == "score 4 of 8: 1 of 2 diagnoses right"


async def test_the_right_diagnosis_with_the_wrong_way_earns_three() -> None:
    app = build(train=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await pick(pilot, "ttft-queueing")
        await pick(pilot, "lower --max-num-seqs")
        revealed = str(app.screen.query_one("#question-answer").render())
        assert "3 of 4 points" in revealed


async def test_escape_hides_the_question_and_a_or_space_brings_it_back() -> None:
    app = build(train=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n", "escape")
        assert not isinstance(app.screen, QuestionScreen)
        assert triage_text(app).startswith("incident 1 of 2: what is wrong here? a answers")
        await pilot.press("w")  # study the screen: the question does not pop back by itself
        assert not isinstance(app.screen, QuestionScreen)
        await pilot.press("a")
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("escape", "space")
        assert isinstance(app.screen, QuestionScreen), "space asks instead of playing on"
        assert not app.replay.playing


async def test_no_skipping_past_an_open_question() -> None:
    app = build(train=True)
    (t1, _), _ = questions()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g", *"+14m", "enter")
        assert app.player.position == t1, "a jump lands on the open question"
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("escape", "full_stop")
        assert app.player.position == t1, "and a step does not go past it"
        await pilot.press("comma")
        assert app.player.position < t1, "going back to look again is fine"
        assert not isinstance(app.screen, QuestionScreen)


def test_the_text_quiz_grades_the_same_answers_the_same() -> None:
    """Same answers as `test_answer_right_then_wrong_then_the_score`, typed on stdin."""
    names = [c.rule for c in catalog()]
    answers = "\n".join([
        str(names.index("ttft-queueing") + 1), "max_num_seqs", "raise",
        str(names.index("memory-ceiling") + 1), "",
    ]) + "\n"  # fmt: skip
    out = io.StringIO()
    assert train_cli.run(str(TRACE), stdin=io.StringIO(answers), stdout=out,
                         catalog=catalog()) == 0  # fmt: skip
    assert out.getvalue().rstrip().endswith("score 4 of 8: 1 of 2 diagnoses right")
