"""Replay and training screens built as the CLI builds them, over a shipped trace.

The app gets a `ReplaySource` over `traces/` and the shipped rules, exactly as `vtop --replay`
does; what differs is that nothing ticks (`autoplay=False`: tests press keys and call
`advance()` with a clock they move), vtop's own CPU is fixed, and the pass over the trace that
finds the findings is made once per test run and handed in (`precomputed`), since it takes
seconds. One test (`test_the_pass_runs_in_a_worker`) makes it the way the screen does.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from vtop.report.train import Choice
from vtop.sources.replay import ReplaySource
from vtop.trace.reader import TraceReader
from vtop.triage.engine import Engine
from vtop.ui.player import Analysis, Chunk, analyse
from vtop.ui.replay_app import ReplayApp

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "budget-too-small.vtrace"
"""Two findings start: ttft-queueing (3:00 in), then budget-too-small, which explains it."""


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
    source = ReplaySource(TraceReader(path), playing=playing, speed=speed,
                          clock=clock or Clock())  # fmt: skip
    return ReplayApp(source, fresh_engine(), train=train, self_cpu=lambda: 0.4, autoplay=False,
                     precomputed=pass_over(path) if precomputed else None)  # fmt: skip
