"""The replay player without a screen: a trace's frames into a `Monitor`, its findings by time.

Two things make a replay feel like the live screen, and they cost very differently:

- The *numbers* (panels, charts, header) come from a `Monitor` fed the trace's frames, exactly
  as live. Ingesting a frame costs ~0.1 ms, so playing at 1000× and rebuilding the history
  after a seek (`Player.seek`) are cheap. This monitor runs no rules.
- The *findings* come from one pass of the report's own code over the whole trace
  (`analyse`, `vtop.report.run.replay_collector`), run once in a worker thread: every rule
  evaluation it makes is kept (`FindingsTimeline`), and the screen shows the findings of the
  last evaluation at or before its position. Evaluating the rules costs ~1.5 ms a poll and a
  rule's state depends on every evaluation before it, so re-evaluating after a seek would
  either take seconds or give different answers from the report; looking them up takes
  microseconds and agrees with `vtop --replay FILE --report --to T` by construction. The same
  pass gives the timeline's marks (where findings start) and training's questions.

A seek rebuilds the history the chart window needs: the last `FAST_LOOKBACK_S` at once, and,
for windows longer than that, the rest in a worker (`Backfill`), swapped in when ready, so a
seek stays well under 200 ms even on a day-long trace at the 1-hour window.

Times typed by the user (`target`) are UTC, like the reports': an offset from the trace's
start (`+5m`, `+1:30:00`), from its end (`-10m`), a clock time (`15:04`, `15:04:05`) or an ISO
time; a bare `1:30:00` that is not a clock time of the trace is taken as an offset.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vtop import durations
from vtop.model import Finding, Frame
from vtop.monitor import Monitor
from vtop.report.collect import monitor_findings
from vtop.sources.replay import ReplaySource
from vtop.trace.reader import TraceReader, Warn
from vtop.training.questions import Choice, Question, questions_of
from vtop.triage.engine import Engine

FAST_LOOKBACK_S = 360.0
"""History rebuilt at once after a seek: the default 5-minute window and a minute to spare."""
MARGIN_S = 60.0
"""History kept before the window, so the rates and statistics at its left edge exist."""
CHUNK_EVERY_S = 0.2
"""How often (wall time) the analysis hands what it has to the screen."""


# -- the analysis pass ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    """Evaluations of the analysis pass, in time order: their times and findings."""

    times: tuple[float, ...]
    findings: tuple[tuple[Finding, ...], ...]


class Cancelled(Exception):
    """The analysis was abandoned (the screen closed)."""


class FindingsTimeline:
    """Every evaluation of the analysis pass, looked up by time; owned by the UI thread."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._findings: list[tuple[Finding, ...]] = []
        self.complete = False
        """The pass has covered the whole trace."""

    def extend(self, chunk: Chunk) -> None:
        self._times.extend(chunk.times)
        self._findings.extend(chunk.findings)

    @property
    def reached(self) -> float | None:
        """Time of the last evaluation so far."""
        return self._times[-1] if self._times else None

    @property
    def evaluations(self) -> int:
        return len(self._times)

    def at(self, t: float | None, endpoint: str | None = None) -> tuple[Finding, ...] | None:
        """The findings of the last evaluation at or before `t` (of one endpoint, if given);
        None while the pass has not got that far."""
        if t is None:
            return None
        reached = self.reached
        if not self.complete and (reached is None or t > reached):
            return None
        i = bisect_right(self._times, t + 1e-9) - 1
        found = self._findings[i] if i >= 0 else ()
        if endpoint is None:
            return found
        return tuple(f for f in found if f.endpoint == endpoint)


@dataclass(frozen=True, slots=True)
class Analysis:
    """What the pass over a whole trace found."""

    marks: list[tuple[float, str]]
    """(time, "SEVERITY rule") wherever a finding begins firing (again)."""
    questions: list[Question]
    """Training's questions: where each rule first fires, on each endpoint."""
    evaluations: int
    step_s: float | None


def analyse(
    path: str,
    engine: Engine,
    catalog: Sequence[Choice],
    *,
    on_chunk: Callable[[Chunk], None],
    cancelled: Callable[[], bool] = lambda: False,
    warn: Warn | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Analysis:
    """The report's pass over the trace with `engine`'s rules (a fresh copy: rules keep state),
    handing every evaluation's findings to `on_chunk` as it goes. Meant for a worker thread;
    raises `Cancelled` soon after `cancelled()` turns true, `TraceError` if unreadable."""
    times: list[float] = []
    found: list[tuple[Finding, ...]] = []
    previous: dict[tuple[str, str], Finding] = {}
    last_sent = clock()

    def flush() -> None:
        nonlocal last_sent
        if times:
            on_chunk(Chunk(tuple(times), tuple(found)))
            times.clear()
            found.clear()
        last_sent = clock()

    def tap(monitor: Monitor) -> list[Finding]:
        if cancelled():
            raise Cancelled
        now = list(monitor_findings(monitor))
        kept = []
        for f in now:  # a finding that did not change is the same object: a day fits in memory
            key = (f.endpoint, f.rule)
            old = previous.get(key)
            if old is not None and old == f:
                f = old
            previous[key] = f
            kept.append(f)
        if monitor.t is not None:
            times.append(monitor.t)
            found.append(tuple(kept))
        if clock() - last_sent >= CHUNK_EVERY_S:
            flush()
        return now

    from vtop.report.run import replay_collector

    fresh = Engine(engine.rules, engine.errors)
    collector = replay_collector(path, findings=tap, warn=warn, engine=fresh)
    flush()
    return Analysis(
        marks=collector.marks(),
        questions=questions_of(collector, catalog),
        evaluations=collector.evaluations,
        step_s=collector.step_s,
    )


# -- the player ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Backfill:
    """The older part of a rebuilt history, read in a worker with its own reader."""

    path: str
    start: float
    end: float
    generation: int
    capacity: int

    def run(self, cancelled: Callable[[], bool] = lambda: False) -> Monitor | None:
        """A monitor holding the frames in [start, end]; None if cancelled on the way."""
        monitor = Monitor(capacity=self.capacity, engine=Engine([]))
        with TraceReader(self.path, warn=lambda message: None) as reader:
            for i, frame in enumerate(reader.frames(self.start, self.end)):
                if i % 256 == 0 and cancelled():
                    return None
                monitor.feed(frame)
        return monitor


@dataclass(slots=True)
class _Pending:
    backfill: Backfill
    since: list[Frame] = field(default_factory=list)
    """Frames fed after the seek, to hand to the backfilled monitor before it takes over."""


class Player:
    """A `ReplaySource` driving a `Monitor` that runs no rules (findings: `FindingsTimeline`)."""

    def __init__(
        self,
        source: ReplaySource,
        *,
        capacity: int = 3600,
        window_s: float = 300.0,
        fast_lookback_s: float = FAST_LOOKBACK_S,
    ) -> None:
        self.source = source
        self.capacity = capacity
        self.window_s = window_s
        self.fast_lookback_s = fast_lookback_s
        self.monitor = self._fresh()
        self.generation = 0
        """Counts seeks: a backfill made for an older position is dropped."""
        self._pending: _Pending | None = None

    def _fresh(self) -> Monitor:
        return Monitor(capacity=self.capacity, engine=Engine([]))

    # -- where ---------------------------------------------------------------------------------

    @property
    def start(self) -> float:
        return self.source.start if self.source.start is not None else 0.0

    @property
    def end(self) -> float:
        end = self.source.end if self.source.end is not None else self.source.reader.end
        return end if end is not None else self.start

    @property
    def position(self) -> float:
        """The time of the last frame shown (the start, before the first)."""
        return self.monitor.t if self.monitor.t is not None else self.start

    @property
    def at_end(self) -> bool:
        return self.source.at_end

    @property
    def interval_s(self) -> float | None:
        return self.source.reader.header.interval_s

    # -- moving forward ------------------------------------------------------------------------

    def _feed(self, frames: Sequence[Frame]) -> None:
        for frame in frames:
            self.monitor.feed(frame)
        pending = self._pending
        if pending is not None and frames:
            pending.since.extend(frames)
            if len(pending.since) > self.capacity:  # it would be pushed out anyway
                self._pending = None

    def advance(self, until: float | None = None) -> int:
        """Feed what the clock has passed (never beyond `until`); returns how many frames."""
        frames = self.source.due()
        if until is not None and frames and frames[-1].t > until + 1e-9:
            frames = [f for f in frames if f.t <= until + 1e-9]
            self.source.pause()
            self.source.seek(until, lookback_s=0.0)  # the next frame is the one after `until`
        self._feed(frames)
        return len(frames)

    def step(self, n: int = 1) -> int:
        """Pause and show the next `n` frames."""
        frames = self.source.step(n)
        self._feed(frames)
        return len(frames)

    # -- jumping -------------------------------------------------------------------------------

    def seek(self, t: float) -> Backfill | None:
        """Go to `t` (clamped to the trace) and rebuild the history the window needs: the last
        `fast_lookback_s` now; the returned `Backfill`, if any, reads the rest (run it in a
        worker and hand its monitor to `adopt`)."""
        want = self.window_s + MARGIN_S
        history = self.source.seek(t, lookback_s=min(want, self.fast_lookback_s))
        self.generation += 1
        self.monitor = self._fresh()
        self._pending = None
        for frame in history:
            self.monitor.feed(frame)
        if want <= self.fast_lookback_s or not history:
            return None
        first, last = history[0].t, history[-1].t
        lo = max(self.start, last - want)
        if first - lo < 1.0:  # the trace has no more history than what was read
            return None
        backfill = Backfill(self.source.reader.path, lo, last, self.generation, self.capacity)
        self._pending = _Pending(backfill)
        return backfill

    def adopt(self, generation: int, monitor: Monitor) -> bool:
        """Take a backfilled monitor, if it is for the current seek; False if it is stale."""
        pending = self._pending
        if pending is None or generation != self.generation:
            return False
        self._pending = None
        for frame in pending.since:
            monitor.feed(frame)
        self.monitor = monitor
        return True

    def step_back(self) -> Backfill | None:
        """Pause and go back one frame (history rebuilt as by `seek`)."""
        self.source.pause()
        times = list(self.source.reader.times(max(self.start, self.position - 60.0), self.position))
        earlier = [x for x in times if x < self.position - 1e-9]
        return self.seek(earlier[-1] if earlier else self.start)

    def next_mark(self) -> tuple[float, str] | None:
        return self.source.next_mark(self.position)

    def previous_mark(self) -> tuple[float, str] | None:
        return self.source.previous_mark(self.position)


# -- times the user types --------------------------------------------------------------------

_CLOCK = re.compile(r"(\d{1,3}):(\d{2})(?::(\d{2}(?:\.\d+)?))?")


def _hms(text: str) -> float | None:
    """`1:30:00` or `90:00` (minutes:seconds) as seconds; None if not that shape."""
    m = _CLOCK.fullmatch(text)
    if m is None:
        return None
    a, b, c = int(m.group(1)), int(m.group(2)), m.group(3)
    return a * 3600 + b * 60 + float(c) if c is not None else a * 60 + b


def target(text: str, start: float, end: float) -> float:
    """Where `g` goes: see the module's docstring. ValueError says what it cannot read."""
    t = text.strip()
    if not t:
        raise ValueError("type a time: +5m, -10m, 1:30:00, 15:04 or an ISO time")
    if t[0] in "+-":
        span = _hms(t[1:])
        try:
            offset = span if span is not None else durations.parse(t[1:])
        except ValueError:
            raise ValueError(f"{text!r} is not an offset (try +5m, +1:30:00, -10m)") from None
        at = start + offset if t[0] == "+" else end - offset
    elif (span := _hms(t)) is not None:
        try:  # `5:75` is no time of day (durations says so), but an offset of 6:15
            clock = durations.parse_time(t, start, end) if int(t.split(":", 1)[0]) < 24 else None
        except ValueError:
            clock = None
        inside = clock is not None and start - 1.0 <= clock <= end + 1.0
        at = clock if clock is not None and inside else start + span
    else:
        at = durations.parse_time(t, start, end)
    return max(start, min(end, at))
