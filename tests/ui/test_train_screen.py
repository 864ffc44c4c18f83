"""Training on the replay screen, driven by Pilot: hidden findings, questions, grading, score.

Over a trace with two distinct incidents on one endpoint (`replaying.two_incidents()`, recorded
once per test run): budget-too-small starts firing 0:14 in (it recommends --max-num-seqs 64);
the server then restarts at 4:01 in scenario memory-ceiling, which starts firing 4:23 in (it
recommends an fp8 KV cache and a lower --max-num-seqs). The tests read the times from the pass
over the trace, not from here. The screen and the text quiz (`vtop.cli.train`) must
grade the same answers the same.
"""

from __future__ import annotations

import io

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from tests.ui.replaying import build, catalog, pass_over, two_incidents
from vtop.cli import train as train_cli
from vtop.durations import clock
from vtop.monitor import Monitor
from vtop.trace.reader import TraceReader
from vtop.ui.replay_app import ReplayApp
from vtop.ui.screens.question import QuestionScreen
from vtop.ui.screens.score import ScoreScreen
from vtop.ui.training import NO_KNOB

SIZE = (120, 40)


def questions() -> list[tuple[float, str]]:
    """The two incidents, in order: the trace is built to hold exactly these."""
    found = [(q.t, q.finding.rule) for q in pass_over(two_incidents())[0].questions]
    assert [rule for _, rule in found] == ["budget-too-small", "memory-ceiling"]
    return found


def start() -> float:
    with TraceReader(two_incidents()) as reader:
        return next(iter(reader.times()))


def train() -> ReplayApp:
    return build(two_incidents(), train=True)


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


def test_the_two_incidents_are_one_endpoint_restarted_in_between() -> None:
    """The trace's shape, which the tests below rely on: two marks, the restart between."""
    (t1, _), (t2, _) = questions()
    analysis = pass_over(two_incidents())[0]
    assert analysis.marks == [(t1, "WARNING budget-too-small"), (t2, "CRITICAL memory-ceiling")]
    assert {q.finding.endpoint for q in analysis.questions} == {"sim://restarted"}
    monitor = Monitor()
    with TraceReader(two_incidents()) as reader:
        for frame in reader.frames(None, None):
            monitor.feed(frame)
    (restart,) = monitor.endpoints["sim://restarted"].store.restarts()
    assert t1 < restart < t2, "the rules start afresh on the restarted server"


async def test_the_replay_stops_where_a_rule_starts_firing_and_asks() -> None:
    app = train()
    (t1, _), _ = questions()
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
    app = train()
    (t1, _), _ = questions()
    async with app.run_test(size=SIZE) as pilot:
        app.seek_to(t1 - 1.0)  # just before: the rules are about to fire
        await pilot.pause()
        text = triage_text(app)
        assert "training: findings stay hidden" in text
        assert not any(rule in text for rule in rule_names())
        assert app.timeline.text("note") == f"n: next incident at {clock(t1 - start())}"
        assert app.timeline.state is not None and app.timeline.state.hidden
        await pilot.press("c")
        assert app._findings(app.monitor, app.endpoint or "") == ()
        await pilot.press("enter")
        assert not isinstance(app.screen, QuestionScreen) or app.player.position == t1


async def test_answer_right_then_wrong_then_the_score() -> None:
    app = train()
    (t1, _), (t2, _) = questions()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        assert app.player.position == t1
        await pick(pilot, "budget-too-small")
        await pick(pilot, "raise --max-num-seqs")
        screen = app.screen
        assert isinstance(screen, QuestionScreen) and screen.step == "reveal"
        revealed = str(screen.query_one("#question-answer").render())
        assert revealed.startswith("right: it was budget-too-small")
        assert "you: budget-too-small, raise --max-num-seqs" in revealed
        assert "4 of 4 points" in revealed and "change: --max-num-seqs 64" in revealed
        # the evidence, as the rule saw it: the batch at its cap with a queue, the KV cache idle
        assert "At the cap with a queue: " in revealed and "KV usage p90: " in revealed
        await pilot.press("enter")
        assert not isinstance(app.screen, QuestionScreen)
        assert "1 of 2 incidents answered · 4 of 4 points" in triage_text(app)
        assert app.timeline.text("note") == f"n: next incident at {clock(t2 - start())}"

        await pilot.press("n")  # the second incident, after the restart
        assert app.player.position == t2
        assert isinstance(app.screen, QuestionScreen)
        await pick(pilot, "budget-too-small")
        await pick(pilot, NO_KNOB[:20])
        revealed = str(app.screen.query_one("#question-answer").render())
        assert revealed.startswith("not quite: it was memory-ceiling")
        assert "0 of 4 points" in revealed
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ScoreScreen)
        body = str(app.screen.query_one("#score-body").render())
        assert body.startswith("score 4 of 8: 1 of 2 diagnoses right")
        assert "you: budget-too-small, no server knob" in body
        await pilot.press("enter")
        assert app.session is not None and app.session.done
        assert app.session.score.summary() == "score 4 of 8: 1 of 2 diagnoses right"


async def test_the_right_diagnosis_with_the_wrong_way_earns_three() -> None:
    app = train()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await pick(pilot, "budget-too-small")
        await pick(pilot, "lower --max-num-seqs")
        revealed = str(app.screen.query_one("#question-answer").render())
        assert "3 of 4 points" in revealed


async def test_the_reveal_says_what_the_advice_would_buy() -> None:
    """The twin runs on a worker once the answer is revealed, on the store at the incident."""
    app = train()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await pick(pilot, "budget-too-small")
        await pick(pilot, "raise --max-num-seqs")
        assert isinstance(app.screen, QuestionScreen) and app.screen.step == "reveal"
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = str(app.screen.query_one("#question-predicted").render())
        assert text.startswith("Predicted effect\n  gen tok/s "), text
        assert "(confidence " in text


async def test_escape_hides_the_question_and_a_or_space_brings_it_back() -> None:
    app = train()
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
    app = train()
    (t1, _), (t2, _) = questions()
    async with app.run_test(size=SIZE) as pilot:
        assert t2 < start() + 7 * 60.0 < app.player.end, "+7m is past both incidents"
        await pilot.press("g", *"+7m", "enter")
        assert app.player.position == t1, "a jump lands on the open question"
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("escape", "full_stop")
        assert app.player.position == t1, "and a step does not go past it"
        await pilot.press("comma")
        assert app.player.position < t1, "going back to look again is fine"
        assert not isinstance(app.screen, QuestionScreen)


async def test_while_the_pass_runs_the_replay_plays_to_the_first_firing_and_says_how_far(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--train` showed an empty screen for the seconds the pass took to find the incidents.
    The triage line says how far the pass is (which trace, how much of it), and the replay
    plays meanwhile, held where a finding first fires, since no question can come before it:
    the question comes when the replay reaches it, with the pass long done."""
    import re

    from tests.ui.replaying import Clock, fresh_engine
    from vtop.sources.replay import ReplaySource
    from vtop.ui.player import Chunk

    analysis, chunks = pass_over(two_incidents())
    times = [t for c in chunks for t in c.times]
    found = [f for c in chunks for f in c.findings]
    (t1, _), _ = questions()
    clock_ = Clock()
    source = ReplaySource(TraceReader(two_incidents()), playing=False, clock=clock_)
    app = ReplayApp(source, fresh_engine(), train=True, self_cpu=lambda: 0.4)
    monkeypatch.setattr(app, "_analyse", lambda: None)  # the test hands the pass in
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.replay.playing, "the replay starts while the pass runs"
        assert triage_text(app).startswith("training: finding the incidents in two-incidents")
        clock_.now += 5.0
        app.advance()
        assert app.player.position == start(), "nothing read yet: held at the start"
        shares = []
        for i in range(0, len(times), 60):
            app._take_chunk(Chunk(tuple(times[i : i + 60]), tuple(found[i : i + 60])))
            await pilot.pause()
            text = triage_text(app)
            m = re.search(r"two-incidents\.vtrace… (\d+)% \((\d+:\d\d) of 8:01\)$", text)
            assert m is not None, text
            shares.append(int(m.group(1)))
        assert shares == sorted(shares) and len(set(shares)) >= 5 and shares[-1] == 100, shares
        assert app.replay.playing, "the pass has read further: the replay goes on"
        clock_.now += 3600.0
        app.advance()
        assert app.player.position == t1, "held where the first finding fires"
        assert not isinstance(app.screen, QuestionScreen)
        app.analysed(analysis)
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen), "the question, at once"
        assert app.player.position == t1


def test_the_text_quiz_grades_the_same_answers_the_same() -> None:
    """Same answers as `test_answer_right_then_wrong_then_the_score`, typed on stdin."""
    names = [c.rule for c in catalog()]
    answers = "\n".join([
        str(names.index("budget-too-small") + 1), "max_num_seqs", "raise",
        str(names.index("budget-too-small") + 1), "",
    ]) + "\n"  # fmt: skip
    out = io.StringIO()
    assert train_cli.run(str(two_incidents()), stdin=io.StringIO(answers), stdout=out,
                         catalog=catalog()) == 0  # fmt: skip
    text = out.getvalue()
    assert text.index("right: it was budget-too-small") < text.index(
        "not quite: it was memory-ceiling"
    )
    assert text.rstrip().endswith("score 4 of 8: 1 of 2 diagnoses right")
