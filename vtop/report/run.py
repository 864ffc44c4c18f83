"""Driving a report (and a headless recording) from a source to a finished document.

`watch()` is the one headless poll loop: it polls a `FrameSource` once per interval (never two
polls at once, never a backlog: a slow poll delays the next instead of stacking; four times a
second for the first seconds where the server answers fast, `vtop.sources.pacing`), hands every
frame to its consumers (the report's collector, the recorder) and stops on request, after a
duration, or both. A source with a past to read (`history()`, Prometheus's backfill) hands it
over first, one frame per step, so a report over `--prometheus` already has the last hour.
A `Startup` ends a watch whose targets have refused every connection since it began (nothing
listens: a wrong port, a server not started) after `STARTUP_S`, or the `--wait-for` a script
gives a server it has just started; a target that answered once is watched through restarts.
`replay_document()` reads a trace in one pass: every poll counts in the
window's figures through a light frame (gauges and counters), and the rules (and the latency
figures, which need only cumulative histograms) run on full frames at most `MAX_EVALUATIONS`
times over the window, so a day-long trace reports in seconds while a short
one is evaluated at every poll, as live.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from vtop.model import Frame
from vtop.monitor import Monitor
from vtop.report.collect import Collector, FindingsFn, monitor_findings
from vtop.report.document import Document
from vtop.report.window import LIGHT
from vtop.sources.base import FrameSource, Simulated, pace, warms_up
from vtop.sources.pacing import WARM_UP_S, Pacer
from vtop.sources.urls import port_hint
from vtop.sources.vllm import REFUSED, no_answer
from vtop.trace.reader import TraceReader, Warn
from vtop.triage.engine import Engine
from vtop.whatif.advice import Advisor
from vtop.whatif.goals import Goals

MAX_EVALUATIONS = 2000
HELD_FRAMES = 10
"""How many refused polls a `Startup` keeps for the document of a watch that gave up: the
default wait's four, a bounded few of a long `--wait-for`."""
LATE_S = 15.0
"""How long past its duration a watch waits for a poll still in flight: longer than any
request timeout (10 s), so only a poll that hangs is cut short, and a script's report ends."""


STARTUP_S = 3.0
"""How long a report waits on targets that have refused every connection since it began
before it says nothing listens there: three of the live source's retries of a refused
connection (one a second), so a server that is just binding its port is still read, and a
wrong port is said in seconds, not after the whole window of polls that cannot succeed."""


@dataclass(slots=True)
class Startup:
    """Whether a watch still waits for its targets to answer at all (`hold`).

    Until a frame holds one scrape that something answered (not a refused connection, not a
    host name that does not resolve), its frames are held back and the watch's duration has
    not begun: a server that comes up is reported from its first answer, not as "partly
    unreadable" for the seconds it was starting. After `wait_s` without an answer it gives up
    (`gave_up`; `line` says so); a watch that ends while waiting hands on the last frames held
    (`release`), so its document says what it saw. An answer of any kind (metrics, an HTTP
    error, a timeout: something listens) ends the wait for good, so a server that answered
    once and then went down is ridden out as before."""

    wait_s: float = STARTUP_S
    answered: bool = False
    gave_up: bool = False
    unanswered: tuple[tuple[str, str], ...] = ()
    """Each endpoint (without credentials) and why nothing answers there, as the last frame
    said: `connection refused` or `unknown host`."""
    _since: float | None = None
    _held: deque[Frame] = field(default_factory=lambda: deque(maxlen=HELD_FRAMES))

    def hold(self, frame: Frame, now: float) -> bool:
        """Whether `frame` is held back: no target answered it, and none has answered yet.
        `now`: when the poll of `frame` began, on the watch's clock."""
        if self.answered:
            return False
        whys = [no_answer(s.error) for s in frame.scrapes]
        if not whys or None in whys:
            self.answered = True
            self._held.clear()
            return False
        self._since = now if self._since is None else self._since
        pairs = zip(frame.scrapes, whys, strict=True)
        self.unanswered = tuple((scrape.endpoint, why or "") for scrape, why in pairs)
        self._held.append(frame)
        self.gave_up = now - self._since >= self.wait_s
        return True

    def release(self) -> list[Frame]:
        """The frames still held (the last `HELD_FRAMES`), oldest first, and none after."""
        frames = list(self._held)
        self._held.clear()
        return frames

    @property
    def line(self) -> str:
        """`nothing listens at URL: connection refused` (with the note on a missing port), or
        `nothing answers at URL: unknown host`; one clause per reason when endpoints differ."""
        parts = []
        for why in dict.fromkeys(why for _, why in self.unanswered):
            urls = [url for url, said in self.unanswered if said == why]
            verb = "listens" if why == REFUSED else "answers"
            hint = port_hint(urls[0]) if len(urls) == 1 and why == REFUSED else ""
            parts.append(f"nothing {verb} at {', '.join(urls)}: {why}{hint}")
        return "; ".join(parts)


def _monitor(engine: Engine | None) -> Monitor | None:
    """A report's monitor running `engine`'s rules; None: the collector's, the shipped ones."""
    return Monitor(engine=engine) if engine is not None else None


async def watch(
    source: FrameSource,
    interval_s: float,
    on_frame: Callable[[Frame], None],
    *,
    duration_s: float | None = None,
    min_polls: int = 1,
    stop: asyncio.Event | None = None,
    late_s: float = LATE_S,
    startup: Startup | None = None,
) -> int:
    """Poll until `stop` is set, or the polls cover `duration_s` and `min_polls` were made; a
    poll still in flight `late_s` after the duration ends the watch without its frame.

    The duration counts from the first answer, not from the first request: a first poll that
    takes 20 s (a starved host, a slow discovery) still leaves the report its 30 s of readings,
    as long as it ends by the deadline (`duration_s + late_s` from the start) a script relies on.
    With a `startup`, refusals before the first answer are no answer: they are held back (and
    handed on if the watch ends while waiting), neither start the duration nor count as polls,
    and the watch ends when `startup` gives up; the deadline moves by its wait."""
    loop = asyncio.get_running_loop()
    # A source that can read the past (Prometheus) hands it over first, a frame per step, so
    # the rules and the report's timeline step through it as if it had been watched live.
    history = getattr(source, "history", None)
    if history is not None:
        for frame in await history():
            on_frame(frame)
    started = loop.time()
    waits = startup.wait_s if startup is not None else 0.0
    deadline = None if duration_s is None else started + waits + duration_s + late_s
    polls = 0
    first: float | None = None
    pacer = Pacer(interval_s, warm_up_s=WARM_UP_S if warms_up(source) else 0.0)
    while stop is None or not stop.is_set():
        tick = loop.time()
        if deadline is None:
            frame = await source.poll()
        else:
            try:
                frame = await asyncio.wait_for(source.poll(), max(0.0, deadline - tick))
            except TimeoutError:
                break
        now = loop.time()
        if startup is not None and startup.hold(frame, tick):  # polls' starts: 1 s apart
            if startup.gave_up:
                break
        else:
            on_frame(frame)
            polls += 1
            first = now if first is None else first
            if duration_s is not None and now - first >= duration_s and polls >= min_polls:
                break
        after = pacer.next_after(frame)
        pace(source, after)
        delay = max(0.0, tick + after - loop.time())
        if stop is None:
            await asyncio.sleep(delay)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
    for held in startup.release() if startup is not None else ():  # ended while waiting
        on_frame(held)
    return polls


async def live_document(
    source: FrameSource,
    *,
    name: str,
    interval_s: float,
    duration_s: float,
    on_frame: Callable[[Frame], None] | None = None,
    findings: FindingsFn = monitor_findings,
    stop: asyncio.Event | None = None,
    engine: Engine | None = None,
    startup: Startup | None = None,
    goals: Goals | None = None,
    advisor: Advisor | None = None,
) -> Document:
    """Watch a live source for `duration_s` (at least two polls, so rates exist).

    `engine`: the rules to run (a fresh engine: it keeps state), else the shipped catalog;
    `startup`: how long targets that refuse every connection are waited for (see `watch`;
    `startup.gave_up` then says the document covers refusals only); `advisor`: one kept
    across several documents of the same server (`Collector`)."""
    collector = Collector(
        source_kind="live",
        source_name=name,
        findings=findings,
        expected_s=duration_s,
        monitor=_monitor(engine),
        goals=goals,
        advisor=advisor,
    )
    collector.step_s = interval_s

    def take(frame: Frame) -> None:
        if on_frame is not None:
            on_frame(frame)
        collector.add(frame)

    await watch(
        source, interval_s, take, duration_s=duration_s, min_polls=2, stop=stop, startup=startup
    )
    collector.interrupted = stop is not None and stop.is_set()
    return collector.document()


def simulated_document(
    source: Simulated,
    *,
    name: str,
    duration_s: float,
    on_frame: Callable[[Frame], None] | None = None,
    findings: FindingsFn = monitor_findings,
    engine: Engine | None = None,
    stop: threading.Event | None = None,
    goals: Goals | None = None,
) -> Document:
    """The simulator for `duration_s` of virtual time, as fast as it computes (≥ two polls).
    `stop` (set by Ctrl-C) ends it early with the polls made so far, as it ends a live watch."""
    step = source.interval_s * source.speed
    collector = Collector(
        source_kind="demo",
        source_name=name,
        findings=findings,
        expected_s=duration_s,
        monitor=_monitor(engine),
        goals=goals,
    )
    collector.step_s = step
    pacer = Pacer(source.interval_s)
    start: float | None = None
    polls = 0
    while True:
        frame = source.poll_now()
        polls += 1
        if on_frame is not None:
            on_frame(frame)
        collector.add(frame)
        start = frame.t if start is None else start
        if polls >= 2 and frame.t - start >= duration_s - 1e-6:
            return collector.document()
        if polls >= 2 and stop is not None and stop.is_set():
            collector.interrupted = True
            return collector.document()
        source.pace(pacer.next_after(frame))


def replay_document(
    path: str,
    *,
    start: float | None = None,
    end: float | None = None,
    findings: FindingsFn = monitor_findings,
    warn: Warn | None = None,
    max_evaluations: int = MAX_EVALUATIONS,
    resolve: Callable[[TraceReader], tuple[float | None, float | None]] | None = None,
    engine: Engine | None = None,
    goals: Goals | None = None,
) -> Document:
    """Report over a trace (or its [start, end] part). Raises `TraceError` if unreadable.

    `resolve`, given the opened reader, may return (start, end) instead, for bounds that are
    relative to the trace (`--from -10m`); `engine` is as in `replay_collector`."""
    return replay_collector(
        path,
        start=start,
        end=end,
        findings=findings,
        warn=warn,
        max_evaluations=max_evaluations,
        resolve=resolve,
        engine=engine,
        goals=goals,
    ).document()


def finding_marks(
    path: str, *, findings: FindingsFn = monitor_findings, warn: Warn | None = None
) -> list[tuple[float, str]]:
    """Where findings begin firing in a trace: the marks of a replay's timeline.

    Runs the rules as a report does (coarsely on long traces), so a screen can compute them in
    a worker thread and hand them to `ReplaySource.set_marks`."""
    return replay_collector(path, findings=findings, warn=warn).marks()


def replay_collector(
    path: str,
    *,
    start: float | None = None,
    end: float | None = None,
    findings: FindingsFn = monitor_findings,
    warn: Warn | None = None,
    max_evaluations: int = MAX_EVALUATIONS,
    resolve: Callable[[TraceReader], tuple[float | None, float | None]] | None = None,
    engine: Engine | None = None,
    goals: Goals | None = None,
) -> Collector:
    """One pass over a trace into a `Collector` (see `replay_document`).

    `engine`: the rules to run (a fresh engine: it keeps state), else the shipped catalog;
    `goals`: what the twin's search for each finding's best setting optimises (the sweet spot
    by default)."""
    with TraceReader(path, warn=warn) as reader:
        if resolve is not None:
            start, end = resolve(reader)
        # A window wider than the trace is the trace: its span sets the rule step, which must
        # not stretch over time the trace does not cover (`--from=-99999999d`).
        if start is not None and reader.start is not None:
            start = max(start, reader.start)
        if end is not None and reader.end is not None:
            end = min(end, reader.end)
        t0 = start if start is not None else reader.start
        t1 = end if end is not None else reader.end
        span = (t1 - t0) if t0 is not None and t1 is not None else None
        collector = Collector(
            source_kind="replay",
            source_name=reader.name,
            findings=findings,
            expected_s=span,
            monitor=_monitor(engine),
            goals=goals,
        )
        step = span / max_evaluations if span else 0.0
        interval = reader.header.interval_s
        collector.step_s = max(step, interval or 0.0) or None
        next_eval = -math.inf
        last_t: float | None = None
        final = t1 if t1 is not None else math.inf
        for poll in reader.polls(start, end):
            last_t = poll.t
            due = poll.t >= next_eval or poll.t >= final
            if due and collector.evaluations < 2 * max_evaluations:  # times may be crafted
                collector.add(poll.frame())
                next_eval = poll.t + step
            else:
                collector.observe(poll.frame(LIGHT), light=True)
        if last_t is not None and collector.last_evaluated != last_t:
            for frame in reader.frames(last_t, last_t):  # the window's end is always judged
                collector.observe_latency(frame)
                collector.judge(frame)
        return collector
