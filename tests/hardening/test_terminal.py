"""The terminal vtop runs in going away, or changing size fast, met in a real terminal (tmux).

A user's terminal is closed (SIGHUP: the window, the SSH session, tmux's kill-pane), or vtop is
told to stop (SIGTERM: `kill`, systemd, a container runtime), or the window is dragged through
a dozen sizes a second. tests/unit/test_trace_recorder.py proves the headless recorder's signal
handling over pipes; these run vtop in a real pseudo-terminal, the way it is used, and check
what must survive: the recording is closed (footer written, every poll until the signal kept,
no damage warning on reading it back), vtop exits with 0 and gives the terminal back, and after
a resize storm the dashboard is alive and laid out for the size it ends at, the verdict
included at 80×24. Each test runs its own tmux server (`-L`) and kills it at the end.
"""

from __future__ import annotations

import functools
import os
import random
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.localfaults import Tmux, alive
from tests.ui.scripted import build_sim_app
from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin
from vtop.sources.pacing import WARM_UP_S
from vtop.trace.reader import TraceReader
from vtop.ui.widgets.triage_panel import TriagePanel


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with serve(Twin("budget-too-small")) as server:
        yield server


def polls_in(path: Path) -> int:
    """Polls readable so far in a trace being written (0 before its header is there)."""
    if not path.exists() or path.stat().st_size < 64:
        return 0
    try:
        with TraceReader(path, warn=lambda message: None) as reader:
            return sum(1 for _ in reader.times())
    except Exception:  # the header is being written
        return 0


def wait_polls(path: Path, n: int, pid: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while (seen := polls_in(path)) < n:
        assert alive(pid), "vtop died while recording"
        assert time.monotonic() < deadline, f"{seen} polls recorded in {timeout} s"
        time.sleep(0.1)
    return seen


def stop(tmux: Tmux, pid: int, how: str) -> None:
    if how == "SIGTERM":
        os.kill(pid, signal.SIGTERM)
    else:
        tmux.close_pane()  # the pty hangs up: SIGHUP to what runs in it


def read_back(path: Path) -> tuple[int, float]:
    """(polls, time of the last one) of a trace that must have been closed cleanly."""
    with TraceReader(path, warn=pytest.fail) as reader:
        assert reader.indexed, "no footer: the recording was not closed"
        polls = reader.stats().polls
        last = max(reader.times())
        assert sum(1 for _ in reader.times()) == polls
    return polls, last


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("watch", ["demo", "url"])
def test_a_headless_recording_is_closed_when_the_terminal_goes(
    tmp_path: Path, sim: SimServer, watch: str, how: str
) -> None:
    source = ["--demo"] if watch == "demo" else ["--url", sim.url]
    path = tmp_path / "t.vtrace"
    with Tmux(tmp_path) as tmux:
        pid = tmux.start(*source, "--record", path.name, "--interval", "0.1", "--headless")
        tmux.wait_screen(lambda s: "vtop: recording to t.vtrace every 0.1 s until Ctrl-C" in s,
                         what="the recording's first line")  # fmt: skip
        seen = wait_polls(path, 5, pid)
        before = time.time()
        stop(tmux, pid, how)
        assert tmux.exit_code() == 0
        assert not alive(pid)
        polls, last = read_back(path)
        assert polls >= seen
        if watch == "url":  # wall-clock frames: the last one is from just before the signal
            assert last >= before - 1.0
        if how == "SIGTERM":  # the pane is still there to read
            screen = tmux.capture()
            assert any(row.startswith(f"vtop: recorded {polls} polls (") and
                       row.endswith(" KiB) to t.vtrace") for row in screen), screen  # fmt: skip
            assert not any("Traceback" in row for row in screen)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_the_dashboards_recording_is_closed_when_the_terminal_goes(
    tmp_path: Path, how: str
) -> None:
    with Tmux(tmp_path, size=(100, 30)) as tmux:
        pid = tmux.start("--demo", "--interval", "0.1")
        tmux.wait_screen(lambda s: any("Triage" in row for row in s), what="the dashboard")
        assert tmux.value("#{alternate_on}") == "1"
        tmux.send("r")
        deadline = time.monotonic() + 20
        while not (traces := list(tmp_path.glob("vtop-*.vtrace"))):
            assert time.monotonic() < deadline, "r did not start a recording"
            time.sleep(0.1)
        (path,) = traces
        seen = wait_polls(path, 5, pid)
        stop(tmux, pid, how)
        assert tmux.exit_code() == (0 if how == "SIGTERM" else 129)  # 128 + SIGHUP: hung up
        assert not alive(pid)
        polls, _ = read_back(path)
        assert polls >= seen
        if how == "SIGTERM":  # the terminal is given back as it was found
            assert tmux.value("#{alternate_on}") == "0"
            assert tmux.value("#{mouse_any_flag}") == "0"


def test_a_terminal_that_hangs_up_without_a_sighup_ends_the_dashboard(tmp_path: Path) -> None:
    """An SSH connection that drops, a tmux server that is killed: the terminal reads EIO or
    end of input, and a SIGHUP need not reach vtop. It must exit (closing its recording)
    rather than paint into a dead terminal at most of a core."""
    with Tmux(tmp_path, size=(100, 30)) as tmux:
        path = tmp_path / "t.vtrace"
        pid = tmux.start("--demo", "--record", path.name, sighup=False)
        tmux.wait_screen(lambda s: any("Triage" in row for row in s), what="the dashboard")
        seen = wait_polls(path, 5, pid)
        tmux.close_pane()
        deadline = time.monotonic() + 10
        while alive(pid):
            assert time.monotonic() < deadline, "vtop outlived its terminal by 10 s"
            time.sleep(0.1)
        assert tmux.exit_code() == 129  # 128 + SIGHUP, as for a hangup
        polls, _ = read_back(path)
        assert polls >= seen


def test_record_on_a_terminal_shows_the_dashboard_and_q_ends_both(
    tmp_path: Path, sim: SimServer
) -> None:
    """`--record` where there is a terminal: the dashboard, recording from the first poll
    (the header says `⏺ rec`), and `q` quits it as it would any dashboard, the recording
    closed with its footer and one line on the terminal saying what it holds."""
    path = tmp_path / "t.vtrace"
    with Tmux(tmp_path, size=(100, 30)) as tmux:
        pid = tmux.start("--url", sim.url, "--record", path.name, "--interval", "0.1")
        tmux.wait_screen(lambda s: any("Triage" in row for row in s) and "⏺ rec" in s[0],
                         what="the dashboard, recording")  # fmt: skip
        assert tmux.value("#{alternate_on}") == "1"
        seen = wait_polls(path, 5, pid)
        tmux.send("q")
        assert tmux.exit_code() == 0
        polls, _ = read_back(path)
        assert polls >= seen
        assert tmux.value("#{alternate_on}") == "0"  # the terminal given back
        # The line comes after the dashboard; with the scrollback, wherever the pane put it.
        screen = tmux.tmux("capture-pane", "-p", "-S", "-", "-t", "main").splitlines()
    assert any(row == f"vtop: recorded {polls} polls ({path.stat().st_size / 1024:.1f} KiB) "
               "to t.vtrace" for row in screen), screen  # fmt: skip
    assert not any("Traceback" in row or "recording to" in row for row in screen), screen


def layout_ok(screen: list[str], width: int, height: int) -> bool:
    """The dashboard drawn for exactly `width`×`height`: the header, the triage box on top,
    the GPU box last, every row of boxes closed at the right edge, the footer at the bottom."""
    if len(screen) != height or any(len(row) > width for row in screen):
        return False
    tops = [row for row in screen if row.startswith("╭─ ")]
    return (
        len(tops) >= 3
        and tops[0].startswith("╭─ Triage ")
        and tops[-1].startswith("╭─ GPU ")
        and all(len(row) == width and row.endswith("╮") for row in tops)
        and "sim://budget-too-small" in screen[0]
        and "q Quit" in screen[-1]
    )


def test_a_resize_storm_leaves_the_dashboard_alive_and_drawn_for_its_last_size(
    tmp_path: Path,
) -> None:
    """Three storms of sixty resizes back to back (80×24, 200×60 and sizes between), each
    then 200×60 and 80×24: the app, drawing for sizes the terminal no longer has, must end
    drawn whole for the size the terminal ends at, the footer and the GPU box included (no
    poll redraws those)."""
    with Tmux(tmp_path, size=(80, 24)) as tmux:
        pid = tmux.start("--demo", "--interval", "0.2")
        for storm in range(3):
            rng = random.Random(storm)
            tmux.wait_screen(lambda s: layout_ok(s, 80, 24), what="the dashboard at 80×24")
            for i in range(60):
                if i % 3 == 2:
                    tmux.resize((rng.randint(80, 200), rng.randint(24, 60)))
                else:
                    tmux.resize((80, 24) if i % 2 else (200, 60))
            for width, height in ((200, 60), (80, 24)):
                tmux.resize((width, height))
                fits = functools.partial(layout_ok, width=width, height=height)
                screen = tmux.wait_screen(fits, what=f"the layout at {width}×{height}")
                assert alive(pid)
                verdict = screen[2]  # the triage box's first line
                assert verdict.startswith(("│ ", "│▶")) and verdict.endswith("│")  # ▶: the cursor
                assert verdict[2:-1].strip(), "the verdict line is empty"
        tmux.send("q")
        assert tmux.exit_code() == 0


async def test_after_a_resize_storm_80x24_shows_the_verdict_as_a_fresh_start_does() -> None:
    """Pilot, over five minutes of a simulated incident and the real rules: the screen after
    the storm is the screen a fresh start at 80×24 draws, finding line and all."""

    def picture(app: Any) -> list[object]:
        regions = [(type(w).__name__, w.id, w.region) for w in app.screen.walk_children()
                   if w.display]  # fmt: skip
        triage = [(line.kind, line.text) for line in app.triage.lines]
        grid = [app.grid.value(pid) for pid in app.grid.order]
        return [regions, triage, grid, list(app.gpus.lines), app.grid.compact]

    fresh = build_sim_app("budget-too-small", findings=None)
    async with fresh.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        expected = picture(fresh)

    app = build_sim_app("budget-too-small", findings=None)
    rng = random.Random(11)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        for _ in range(40):
            await pilot.resize_terminal(rng.randint(60, 220), rng.randint(16, 70))
        await pilot.resize_terminal(200, 60)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.is_running
        assert picture(app) == expected
        first = app.triage.lines[0]
        assert first.kind == "firing" and first.finding is not None
        assert first.finding.rule == "budget-too-small"
        assert first.text.startswith("budget-too-small: Budget too small")
        assert isinstance(app.triage, TriagePanel) and app.triage.region.bottom <= 24


def helper_thread_wakeups(pid: int) -> int:
    """How often vtop's threads other than the main one have blocked and woken again (their
    voluntary context switches). Those are Textual's input thread and its output thread, which
    wakes once per screen update: with a long poll interval and no key, a handful at most."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name != str(pid):
            status = (task / "status").read_text()
            found = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M)
            assert found is not None, status
            total += int(found[1])
    return total


def test_the_input_thread_sleeps_until_a_key_comes_and_every_key_still_arrives(
    tmp_path: Path,
) -> None:
    """Textual's own input thread wakes ten times a second, key or not (an eighth of vtop's
    CPU on the bench); vtop's driver (`vtop.ui.driver`) blocks it until a key comes or the app
    ends. Idle, it must not wake; a key, a lone Escape (sent only after the escape delay) and
    q (the thread must end for vtop to exit) must all still work in a real terminal."""
    with Tmux(tmp_path, size=(100, 30)) as tmux:
        pid = tmux.start("--demo", "--interval", "10")
        tmux.wait_screen(lambda s: any("Triage" in row for row in s), what="the dashboard")
        # the terminal's answers to start-up queries, the ticks after them, and the first 15 s
        # of polling four times a second (vtop.sources.pacing): idle means after those
        time.sleep(WARM_UP_S + 2.0)
        before = helper_thread_wakeups(pid)
        time.sleep(3.0)
        woken = helper_thread_wakeups(pid) - before
        assert woken <= 6, f"vtop's input and output threads woke {woken} times in 3 s idle"

        def helped(screen: list[str]) -> bool:
            return any("vtop keys" in row for row in screen)

        tmux.send("?")
        tmux.wait_screen(helped, what="the help screen")
        tmux.send("Escape")
        tmux.wait_screen(lambda s: not helped(s), timeout=5, what="Escape to close the help")
        tmux.send("q")
        assert tmux.exit_code(timeout=5) == 0
        assert not alive(pid)
