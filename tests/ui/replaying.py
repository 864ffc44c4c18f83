"""Replay and training screens built as the CLI builds them, over a trace.

The trace is a shipped one (traces/budget-too-small.vtrace, one incident), or, for training
over more than one incident, `two_incidents()`: recorded here once per test run, the way
`traces/make_traces.py` records the shipped ones, since no shipped trace has two.
The app gets a `ReplaySource` over it and the shipped rules, exactly as `vtop --replay`
does; what differs is that nothing ticks (`autoplay=False`: tests press keys and call
`advance()` with a clock they move), vtop's own CPU is fixed, and the pass over the trace that
finds the findings is made once per test run and handed in (`precomputed`), since it takes
seconds. One test (`test_the_pass_runs_in_a_worker`) makes it the way the screen does.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from vtop.sources.replay import ReplaySource
from vtop.sources.sim import SimSource, sim_url
from vtop.trace.reader import TraceReader
from vtop.trace.recorder import Recorder
from vtop.training.questions import Choice
from vtop.triage.engine import Engine
from vtop.ui.replay_app import ReplayApp
from vtop.ui.views.player import Analysis, Chunk, analyse

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "budget-too-small.vtrace"
"""One finding starts: budget-too-small, 0:14 in; ttft-queueing, its symptom, is held back
while the cause is about to fire, then explained by it (suppressed), so never starts itself."""

EPOCH = 1_750_000_000.0
"""The fixed epoch of `traces/make_traces.py`: the same polls every run."""
ENDPOINT = sim_url("restarted")


@lru_cache(maxsize=1)
def _scratch() -> tempfile.TemporaryDirectory[str]:
    """Where traces made for the tests go; removed when the test run ends."""
    return tempfile.TemporaryDirectory(prefix="vtop-tests-")


@lru_cache(maxsize=1)
def two_incidents() -> Path:
    """A trace with two incidents on one endpoint that restarts, recorded once per test run.

    A simulated server in scenario budget-too-small, polled once a simulated second for 4
    minutes after its warm-up, then the same endpoint restarted in scenario memory-ceiling,
    polled for 4 minutes more: the new server starts where the old one's last poll was, from
    zero (no warm-up: its counters reset and its start time moves, so vtop sees a restart and
    the rules start afresh) and polls go on without a gap. Recorded through the `Recorder`
    that `vtop --record` uses; deterministic (seed 0, a fixed epoch), like the shipped traces,
    but for the process metrics on the page (CPU, memory, GC), which are this process's own.

    Its incidents: budget-too-small starts firing 0:14 in (ttft-queueing, its symptom, is
    explained by it at once); the server restarts at 4:01 and memory-ceiling starts firing
    4:23 in (a warning, critical from 4:33). Nothing else starts.
    """
    path = Path(_scratch().name) / "two-incidents.vtrace"
    first = SimSource.scenario(
        "budget-too-small", seed=0, epoch=EPOCH, interval_s=1.0, in_thread=False
    )
    with Recorder(
        path, sources=["demo budget-too-small, then memory-ceiling (seed 0)"], interval_s=1.0
    ) as rec:
        frames = [first.poll_now() for _ in range(4 * 60 + 1)]
        second = SimSource.scenario(
            "memory-ceiling",
            seed=0,
            epoch=frames[-1].t,
            warm_up=False,
            interval_s=1.0,
            in_thread=False,
        )
        frames += [second.poll_now() for _ in range(4 * 60 + 1)]
        for frame in frames:
            rec.feed(
                replace(frame, scrapes=tuple(replace(s, endpoint=ENDPOINT) for s in frame.scrapes))
            )
    return path


@lru_cache(maxsize=1)
def engine() -> Engine:
    return Engine.from_catalog(user=False)


@lru_cache(maxsize=4)
def pass_over(path: Path = TRACE) -> tuple[Analysis, tuple[Chunk, ...]]:
    """The screen's pass over a trace, made once."""
    chunks: list[Chunk] = []
    analysis = analyse(str(path), fresh_engine(), catalog(), on_chunk=chunks.append)
    return analysis, tuple(chunks)


def fresh_engine() -> Engine:
    e = engine()
    return Engine(e.rules, e.errors)


def catalog() -> list[Choice]:
    return [Choice(str(r.id), str(r.title)) for r in engine().rules]


class Clock:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def build(
    path: Path = TRACE,
    *,
    train: bool = False,
    precomputed: bool = True,
    playing: bool = False,
    clock: Clock | None = None,
    speed: float = 1.0,
) -> ReplayApp:
    source = ReplaySource(TraceReader(path), playing=playing, speed=speed, clock=clock or Clock())
    return ReplayApp(
        source,
        fresh_engine(),
        train=train,
        self_cpu=lambda: 0.4,
        autoplay=False,
        precomputed=pass_over(path) if precomputed else None,
    )
