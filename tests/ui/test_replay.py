"""The replay screen driven by Pilot: every player key, seeking, marks, and its findings.

Built as `vtop --replay traces/budget-too-small.vtrace` builds it (tests/ui/replaying.py).
The findings on screen at any time must be what a report over the trace up to that time says,
and what a live monitor fed the same frames says: the check that a replay is the incident.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.replaying import TRACE, Clock, build, fresh_engine, pass_over
from vtop.model import Finding, Severity
from vtop.monitor import Monitor
from vtop.report.run import replay_document
from vtop.trace.reader import TraceReader
from vtop.ui.replay_app import ReplayApp, utc
from vtop.ui.screens.goto import GoToScreen
from vtop.ui.screens.replay_help import ReplayHelpScreen

SIZE = (120, 40)


def frame_times(path: Path = TRACE) -> list[float]:
    with TraceReader(path) as reader:
        return list(reader.times())


def shown(app: ReplayApp) -> list[Finding]:
    ep = app.endpoint
    assert ep is not None
    found = app._findings(app.monitor, ep)
    assert found is not None, "the findings at this time are known"
    return list(found)


def verdicts(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(f.rule, f.state) for f in findings if f.state in ("firing", "suppressed")}


def marks() -> list[tuple[float, str]]:
    return pass_over()[0].marks


async def test_opens_at_the_start_and_the_header_says_replay_with_the_trace_time() -> None:
    app = build()
    times = frame_times()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.player.position == times[0]
        assert app.monitor.t is None or app.monitor.t == times[0]
        app.action_step(1)
        await pilot.pause()
        assert app.header.text("status") == f"● replay {utc(times[0], date=True)}"
        assert app.header.text("status").startswith("● replay 2025-06-15 ")
        assert app.timeline.text("pos") == "0:00 / 15:01"
        assert app.timeline.text("state") == "⏸ ×1"


async def test_space_plays_and_pauses_on_the_trace_clock() -> None:
    clock = Clock()
    app = build(clock=clock)
    times = frame_times()
    async with app.run_test(size=SIZE) as pilot:
        assert not app.replay.playing
        await pilot.press("space")
        assert app.replay.playing and app.timeline.text("state") == "▶ ×1"
        clock.now += 10.0
        due = [t for t in times if t <= times[0] + 10.0]
        assert app.advance() == len(due)  # the first frame, then one a second
        assert app.monitor.t == due[-1]
        await pilot.press("space")
        assert not app.replay.playing and app.timeline.text("state") == "⏸ ×1"
        clock.now += 100.0
        assert app.advance() == 0, "paused: the clock moves, the replay does not"
        await pilot.press("space", "right_square_bracket", "right_square_bracket")
        assert app.replay.speed == 5.0
        clock.now += 2.0
        more = [t for t in times if due[-1] < t <= due[-1] + 10.0]
        assert app.advance() == len(more) and len(more) >= 9, "2 s at 5×: 10 s of trace"
        assert app.monitor.t == more[-1]


@pytest.mark.parametrize(("faster", "slower"), [(">", "<"), ("]", "[")])
async def test_speed_goes_from_1_to_1000_and_no_further(faster: str, slower: str) -> None:
    app = build()
    async with app.run_test(size=SIZE) as pilot:
        seen = []
        for _ in range(12):
            await pilot.press(faster)
            seen.append(app.replay.speed)
        assert seen[:3] == [2.0, 5.0, 10.0] and seen[-3:] == [1000.0, 1000.0, 1000.0]
        assert app.timeline.text("state").endswith("×1000")
        said = [n.message for n in app._notifications if "replay speed" in n.message]
        assert said and set(said) == {"fastest replay speed already: ×1000"}, said
        for _ in range(12):
            await pilot.press(slower)
        assert app.replay.speed == 1.0
        said = [n.message for n in app._notifications if "slowest" in n.message]
        assert said and set(said) == {"slowest replay speed already: ×1"}, said


async def test_full_stop_and_comma_step_one_poll_and_pause() -> None:
    app = build(playing=True)
    times = frame_times()
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(5):
            await pilot.press("full_stop")
        assert not app.replay.playing
        assert app.monitor.t == times[4]
        await pilot.press("comma")
        assert app.monitor.t == times[3]
        store = app.monitor.endpoints[app.endpoint or ""].store
        assert list(store.times()) == times[:4], "stepping back rebuilds the history before"
        await pilot.press("comma", "comma", "comma", "comma", "comma")
        assert app.monitor.t == times[0]
        await pilot.press("full_stop")
        assert app.monitor.t == times[1]


async def test_g_goes_to_an_offset_a_clock_time_or_says_what_it_cannot_read() -> None:
    app = build()
    times = frame_times()
    start = times[0]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g")
        assert isinstance(app.screen, GoToScreen)
        await pilot.press(*"+5m", "enter")
        assert not isinstance(app.screen, GoToScreen)
        assert app.player.position == max(t for t in times if t <= start + 300)
        ep = app.endpoint or ""
        history = app.monitor.endpoints[ep].store.times()
        assert history[0] <= start + 1.0, "five minutes in, the whole history before is there"

        await pilot.press("g", *"1:30", "enter")  # 01:30 UTC is not in the trace: an offset
        assert app.player.position == max(t for t in times if t <= start + 90)

        clock_time = utc(start + 600, date=False)[:5]  # HH:MM of ten minutes in
        await pilot.press("g", *clock_time, "enter")
        assert abs(app.player.position - (start + 600)) < 61

        await pilot.press("g", *"-1m", "enter")
        assert app.player.position == max(t for t in times if t <= times[-1] - 60)

        await pilot.press("g", *"soon", "enter")
        assert isinstance(app.screen, GoToScreen), "a time it cannot read keeps the dialog"
        assert "not a time" in str(app.screen.query_one("#goto-error").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, GoToScreen)
        assert app.player.position == max(t for t in times if t <= times[-1] - 60)


async def test_n_and_shift_n_jump_between_the_places_findings_start() -> None:
    app = build()
    # one place: the cause fires first (its fast path) and carries its symptom, which never
    # fires ahead of it (ttft-queueing is held back, then explained)
    ((t1, label1),) = marks()
    assert label1.endswith("budget-too-small")
    times = frame_times()
    async with app.run_test(size=SIZE) as pilot:
        assert app.timeline.text("note") == f"n: budget-too-small at {_offset(t1)}"
        await pilot.press("n")
        assert app.player.position == t1
        assert verdicts(shown(app)) >= {("budget-too-small", "firing")}
        assert app.triage.lines[0].text.startswith("budget-too-small: Budget too small")
        assert app.timeline.text("note") == "no finding starts after here"
        await pilot.press("n")
        assert app.player.position == t1, "no mark after the last: stay"
        app.seek_to(times[-1])
        await pilot.pause()
        await pilot.press("N")
        assert app.player.position == t1
        await pilot.press("N")
        assert app.player.position == t1


def _offset(t: float) -> str:
    from vtop.durations import clock

    return clock(t - frame_times()[0])


def live_findings(upto: float) -> list[Finding]:
    """Every frame up to `upto` fed to a monitor with the rules on, as the live screen does."""
    monitor = Monitor(engine=fresh_engine())
    with TraceReader(TRACE) as reader:
        for frame in reader.frames(None, upto):
            monitor.feed(frame)
    return [f for view in monitor.endpoints.values() for f in view.findings]


async def test_the_findings_at_any_time_are_the_reports_and_the_live_screens() -> None:
    app = build()
    times = frame_times()
    ((t1, _),) = marks()
    probes = [times[5], t1 - 1.0, t1, times[100], times[700], times[-1]]
    async with app.run_test(size=SIZE) as pilot:
        for t in probes:
            app.seek_to(t)
            await pilot.pause()
            on_screen = shown(app)
            # the report says which findings stand at the end of its window (firing, or
            # explained by another); its `state` is the last one that fired, so not compared;
            # and which warnings are still being judged (pending), as the screen does
            doc = replay_document(str(TRACE), end=t)
            undecided = ("pending", "insufficient")
            reported = {
                f["rule"]
                for f in doc["findings"]
                if f["active_at_end"] and f["state"] not in undecided
            }
            assert {rule for rule, _ in verdicts(on_screen)} == reported, t
            judging = {f["rule"] for f in doc["findings"] if f["state"] in undecided}
            assert judging == {
                f.rule for f in on_screen if f.state in undecided and f.severity >= Severity.WARNING
            }, t
            live = live_findings(t)
            assert [(f.rule, f.state, f.summary) for f in on_screen] == [
                (f.rule, f.state, f.summary) for f in live
            ], t
    assert "budget-too-small" in reported


async def test_a_seek_rebuilds_charts_and_a_longer_window_reads_older_history() -> None:
    app = build()
    times = frame_times()
    async with app.run_test(size=SIZE) as pilot:
        app.seek_to(times[800])
        await pilot.pause()
        ep = app.endpoint or ""
        history = app.monitor.endpoints[ep].store.times()
        assert history[0] <= times[800] - 300 and history[-1] == times[800]
        assert history[0] > times[800] - 900, "only what the 5-minute window needs, at once"
        trend = app.grid.trend("running")
        assert trend is not None and any(v is not None for v in trend.values)
        await pilot.press("w")  # 15 minutes
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.window_s == 900.0
        history = app.monitor.endpoints[app.endpoint or ""].store.times()
        assert history[0] <= times[800] - 780, "the 15-minute window's history was read"
        assert history[-1] == times[800]


async def test_the_end_of_the_trace_stops_and_space_plays_it_again() -> None:
    clock = Clock()
    app = build(clock=clock)
    times = frame_times()
    async with app.run_test(size=SIZE) as pilot:
        app.seek_to(times[-3])
        await pilot.press("space")
        clock.now += 10.0
        app.advance()
        await pilot.pause()
        assert app.player.at_end and not app.replay.playing
        assert app.timeline.text("state").startswith("■ end")
        await pilot.press("space")
        assert app.replay.playing and app.player.position == times[0]


async def test_help_lists_the_player_keys_and_r_records_nothing() -> None:
    app = build()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, ReplayHelpScreen)
        text = str(app.screen.query_one("Static").render())
        for key in ("space", "> <  ] [", ". ,", "g", "n N", "w"):
            assert key in text
        await pilot.press("escape", "r")
        assert app.recorder is None


async def test_the_pass_runs_in_a_worker_and_streams_findings_in() -> None:
    app = build(precomputed=False)
    async with app.run_test(size=SIZE) as pilot:
        assert app.analysis is None
        app.action_step(1)
        await pilot.pause()  # the pass starts after the first paint
        assert app.workers, "the pass runs in a worker"
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.analysis is not None and app.findings_timeline.complete
        assert app.analysis.marks == marks()
        assert [m[0] for m in app.replay.marks] == [m[0] for m in marks()]
        assert app.timeline.text("note").startswith("n: budget-too-small at ")


def test_an_unreadable_trace_is_one_line_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from vtop.cli import main

    bad = tmp_path / "nothing.vtrace"
    bad.write_bytes(b"not a trace")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["--replay", str(bad)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vtop: ") and "nothing.vtrace" in err[0]


@pytest.mark.parametrize(
    ("argv", "tty", "screen"),
    [
        (["--replay", "t.vtrace"], True, True),
        (["--replay", "t.vtrace", "--train"], True, True),
        (["--replay", "t.vtrace", "--train"], False, False),  # the text quiz, on a pipe
        (["--replay", "t.vtrace"], False, False),  # the usage error: add --report
        (["--replay", "t.vtrace", "--report"], True, False),
    ],
)
def test_the_command_line_sends_a_terminal_to_the_screen(
    argv: list[str], tty: bool, screen: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from vtop.cli import build_parser, replay_screen_wanted

    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    assert replay_screen_wanted(build_parser().parse_args(argv)) is screen
