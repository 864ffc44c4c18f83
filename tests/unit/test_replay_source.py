"""The replay source: frames in order on a virtual clock, speed, pause, step, seek, marks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tracegen import busy_frames
from vtop.model import Frame
from vtop.monitor import Monitor
from vtop.sources.replay import EndOfTrace, ReplaySource
from vtop.trace import TraceReader
from vtop.trace.recorder import Recorder

FRAMES = list(busy_frames(300, seed=9))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "r.vtrace"
    with Recorder(path, interval_s=1.0, keyframe_every=64) as rec:
        for f in FRAMES:
            rec.feed(f)
    return path


def ts(frames: list[Frame]) -> list[float]:
    return [round(f.t, 6) for f in frames]


async def test_unpaced_poll_yields_every_frame_then_end_of_trace(trace: Path) -> None:
    src = ReplaySource(TraceReader(trace), paced=False)
    got = [await src.poll() for _ in range(300)]
    assert ts(got) == ts(FRAMES)
    with pytest.raises(EndOfTrace):
        await src.poll()
    assert src.status("x").text == "replay: end of trace"
    await src.aclose()


def test_the_virtual_clock_runs_at_speed_and_stops_when_paused(trace: Path) -> None:
    clock = Clock()
    src = ReplaySource(TraceReader(trace), speed=10, clock=clock)
    assert len(src.due()) == 1  # the first frame is due at once
    clock.now += 1.0  # ten seconds of trace at 10x
    assert len(src.due()) == 10
    src.pause()
    clock.now += 100
    assert src.due() == [] and not src.playing
    src.play()
    src.speed = 5000  # clamped
    assert src.speed == 1000
    clock.now += 0.05  # 50 s of trace
    assert len(src.due()) == 50
    assert src.slower() == 500 and src.faster() == 1000 and src.faster() == 1000
    src.speed = 0.01
    assert src.speed == 1


def test_step_hands_out_frames_one_by_one_and_pauses(trace: Path) -> None:
    src = ReplaySource(TraceReader(trace), paced=True, clock=Clock())
    first = src.step()
    assert ts(first) == ts(FRAMES[:1]) and not src.playing
    assert ts(src.step(3)) == ts(FRAMES[1:4])
    assert src.due() == []


def test_seek_returns_history_that_rebuilds_the_monitor(trace: Path) -> None:
    src = ReplaySource(TraceReader(trace), paced=False)
    history = src.seek(FRAMES[200].t, lookback_s=60)
    assert ts(history) == ts(FRAMES[140:201])
    assert history[0].scrapes[0].knobs == FRAMES[0].scrapes[0].knobs  # carried over the seek
    assert src.position == pytest.approx(FRAMES[200].t)
    assert src.step()[0].t == pytest.approx(FRAMES[201].t)
    rebuilt, live = Monitor(), Monitor()
    for f in history:
        rebuilt.feed(f)
    for f in FRAMES[:201]:
        live.feed(f)
    a, b = rebuilt.view(FRAMES[0].scrapes[0].endpoint), live.view(FRAMES[0].scrapes[0].endpoint)
    for sig in ("running", "kv_usage"):
        assert a.store.avg(sig, 30) == pytest.approx(b.store.avg(sig, 30), abs=1e-6)
    assert a.store.rate("generation_tokens", 30) == pytest.approx(
        b.store.rate("generation_tokens", 30), rel=1e-9
    )
    assert a.knobs == b.knobs


def test_step_back_goes_to_the_previous_frame(trace: Path) -> None:
    src = ReplaySource(TraceReader(trace), paced=False)
    src.seek(FRAMES[100].t)
    history = src.step_back(lookback_s=10)
    assert history[-1].t == pytest.approx(FRAMES[99].t)
    assert src.step()[0].t == pytest.approx(FRAMES[100].t)


def test_seek_is_clamped_to_the_trace(trace: Path) -> None:
    src = ReplaySource(TraceReader(trace), paced=False)
    assert src.seek(0.0) == [] or src.position == pytest.approx(FRAMES[0].t)
    history = src.seek(FRAMES[-1].t + 1e6, lookback_s=5)
    assert history[-1].t == pytest.approx(FRAMES[-1].t) and src.at_end


def test_marks_jump_forward_and_back(trace: Path) -> None:
    src = ReplaySource(TraceReader(trace), paced=False)
    t0 = FRAMES[0].t
    src.set_marks([(t0 + 200, "b"), (t0 + 50, "a"), (t0 + 250, "c")])
    assert src.next_mark() == (t0 + 50, "a")
    src.seek(t0 + 50)
    assert src.next_mark() == (t0 + 200, "b")
    assert src.previous_mark() is None
    src.seek(t0 + 230)
    assert src.previous_mark() == (t0 + 200, "b")
    assert src.next_mark(t0 + 250) is None
    assert [label for _, label in src.marks] == ["a", "b", "c"]


async def test_paced_poll_waits_for_the_virtual_clock(trace: Path) -> None:
    import time

    src = ReplaySource(TraceReader(trace), speed=50)
    start = time.monotonic()
    got = [await src.poll() for _ in range(6)]
    elapsed = time.monotonic() - start
    assert ts(got) == ts(FRAMES[:6])
    assert 0.07 < elapsed < 1.0  # five one-second gaps at 50x: 0.1 s
