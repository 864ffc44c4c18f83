"""From frames to a verdict: the report document that every format renders.

One path for every source: frames (live, simulated, replayed) go into a `Monitor`, exactly as
the TUI feeds them, and the rules' findings are read back from it after each evaluation;
the same frames also go into `WindowStats` for the window's figures. A long trace cannot be
evaluated at every poll in the time a script allows, so `observe(frame, light=True)` takes a
light frame for the figures only; what such polls announce is not lost by skipping: their
knobs and server info go to the monitor at once (`Monitor.configure`; the document reads them
from there, as the screens do), their events with the next evaluated frame.

What each finding did across the evaluations, and whether it counts for the status (it fired
and no root cause came to explain it in the same episode), is `vtop.report.tracks`; the
document's typed records are written in `vtop.report.build`. What stays here is the feeding
and the verdict, so that the status and the findings list read the same tracks in one order.

A rule whose condition still holds at the window's end while its evidence accrues (pending, or
waiting for requests to finish) is no verdict, and no all-clear either: it is reported with its
progress, and when nothing at WARNING or above fired, the status is UNKNOWN (exit 3) with what a
longer report would need ("budget-too-small: held for all 30 s; needs 15 s more"), never OK. A
script acting on the exit code must not read "fine" for a server vtop is still judging, nor for
one it hardly saw: a live window whose polls were held up (`_short_watch`) is UNKNOWN too.

The headline leads with what counts, worst first, then what still fires at the end, in the
engine's root-cause order. The document is plain JSON data, versioned (`REPORT_VERSION`) and
described by docs/report-schema.json; text, Markdown and HTML are views of it, so they cannot
disagree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Final, cast, get_args

from vtop import __version__, durations
from vtop.exits import verdict_code
from vtop.model import ACCRUING, Event, Finding, Frame, Severity
from vtop.monitor import Monitor
from vtop.report import tracks
from vtop.report.build import (
    check_doc,
    endpoint_doc,
    event_doc,
    finding_doc,
    gpu_docs,
    source_doc,
    timeline_doc,
    undecided_doc,
    window_doc,
)
from vtop.report.document import (
    Document,
    NoSignals,
    PredictionCheckDoc,
    SignalsDoc,
    SourceKind,
    Status,
    VerdictCode,
)
from vtop.report.tracks import Track
from vtop.report.window import WindowStats
from vtop.triage.engine import MIN_DECISIVE_POLLS
from vtop.whatif.advice import Advice, Advisor, prediction_reading, twin_failed, unavailable
from vtop.whatif.goals import Goals

REPORT_VERSION: Final = 1
FindingsFn = Callable[[Monitor], Iterable[Finding]]
"""Every current finding of every endpoint the monitor watches."""
MAX_EVENTS = 200
HELD_UP = "vtop's polls were held up"
"""Why a live window covers under half what was asked, in the UNKNOWN it gets (`_short_watch`)."""
PREDICT_BUDGET_S = 6.0
"""Time the report spends predicting at most (a fit and a run cost about a second each): a
fleet's report ends seconds after its window, not a minute; later findings go unpredicted."""


def monitor_findings(monitor: Monitor) -> Iterable[Finding]:
    """The findings the monitor's rule engine holds for every endpoint after the last feed."""
    out: list[Finding] = []
    for view in monitor.endpoints.values():
        out.extend(getattr(view, "findings", ()))
    return out


class Collector:
    """Feeds frames to a monitor and the window statistics; `document()` is the report."""

    def __init__(
        self,
        *,
        source_kind: SourceKind,
        source_name: str,
        findings: FindingsFn = monitor_findings,
        expected_s: float | None = None,
        capacity: int = 3600,
        monitor: Monitor | None = None,
        goals: Goals | None = None,
        advisor: Advisor | None = None,
    ) -> None:
        self.source_kind = source_kind
        self.goals = advisor.goals if advisor is not None else goals or Goals()
        """What the twin's search for each finding's best setting optimises."""
        self.advisor = advisor
        """One kept across documents (`vtop tune`'s trials): the twin of each is fitted to the
        server's steps at every configuration it was seen at. None: a fresh one each time."""
        self.source_name = source_name
        self.monitor = monitor or Monitor(capacity=capacity)
        self.stats = WindowStats(expected_s)
        self._findings = findings
        self._tracks: dict[tuple[str, str], Track] = {}
        self._accruing: dict[tuple[str, str], Finding] = {}
        """Findings whose condition held at the last evaluation while their evidence accrued."""
        self._pending_events: list[Event] = []
        """Events of polls observed since the last evaluated one, for the monitor's history."""
        self.events: list[Event] = []
        self.evaluations = 0
        self.last_evaluated: float | None = None
        self.step_s: float | None = None
        self.interrupted = False
        """The watch was ended by the user (SIGINT): a window shorter than asked is theirs."""

    def add(self, frame: Frame, *, evaluate: bool = True) -> None:
        """One poll. With `evaluate`, the frame must be complete and the rules run on it."""
        self.observe(frame)
        if evaluate:
            self.judge(frame)

    def observe(self, frame: Frame, *, light: bool = False) -> None:
        """Count a poll in the window's figures; a `light` frame carries no GPU readings."""
        self.stats.add(frame, gpu=not light)
        for s in frame.scrapes:
            if s.knobs is not None or s.server is not None:
                self.monitor.configure(s)
        for ev in frame.events:
            if len(self.events) < MAX_EVENTS:
                self.events.append(ev)
        self._pending_events.extend(frame.events)
        del self._pending_events[:-MAX_EVENTS]

    def observe_latency(self, frame: Frame) -> None:
        """Take a complete frame's histograms for a poll already observed as a light frame."""
        for s in frame.scrapes:
            ep = self.stats.endpoints.get(s.endpoint)
            if ep is not None and s.ok:
                ep.add_latency(s)

    def judge(self, frame: Frame) -> None:
        """Feed a complete frame (already observed) to the monitor and evaluate the rules."""
        fed = self._with_pending_events(frame)
        # The monitor returns the frame's events and those its store revealed (a restart seen
        # in the counters, which no source announces); only the latter are new here.
        revealed = self.monitor.feed(fed)[len(fed.events) :]
        self.events.extend(revealed[: max(0, MAX_EVENTS - len(self.events))])
        self.evaluations += 1
        self.last_evaluated = frame.t
        self._evaluate(frame.t)

    def _with_pending_events(self, frame: Frame) -> Frame:
        """The frame with the events of the polls observed since the last evaluated one (its
        own among them)."""
        if not self._pending_events:
            return frame
        events = tuple(self._pending_events)
        self._pending_events.clear()
        return replace(frame, events=events)

    def _evaluate(self, t: float) -> None:
        seen = set()
        self._accruing = {}
        for rank, f in enumerate(self._findings(self.monitor)):
            if f.state in ACCRUING:
                self._accruing[(f.endpoint, f.rule)] = f  # not a verdict, nor an all-clear
                continue
            key = (f.endpoint, f.rule)
            seen.add(key)
            firing = f.state == "firing"
            track = self._tracks.get(key)
            if track is None:
                self._tracks[key] = Track(
                    f,
                    t,
                    t,
                    f.severity,
                    starts=[t] if firing else [],
                    onset=f if firing else None,
                    state_since=t,
                    rank=rank,
                    episode=f.severity if firing else None,
                )
                continue
            track.observe(f, t, rank)
        for key, track in self._tracks.items():
            if key not in seen:
                track.end_episode()

    def onsets(self) -> list[tuple[float, Finding]]:
        """(time, finding) where each rule first fired on each endpoint, in time order."""
        out = [
            (tr.starts[0], tr.onset)
            for tr in self._tracks.values()
            if tr.onset is not None and tr.starts
        ]
        return sorted(out, key=lambda x: x[0])

    def marks(self) -> list[tuple[float, str]]:
        """(time, "SEVERITY rule") wherever a finding began firing, in time order."""
        out = [
            (t, f"{tr.worst.name} {tr.finding.rule}")
            for tr in self._tracks.values()
            for t in tr.starts
        ]
        return sorted(out)

    # -- the document --------------------------------------------------------------------------

    def status(self, ranked: list[Track] | None = None) -> tuple[Status, str]:
        """The verdict and its reason (`ranked`: the findings in the report's order, when the
        caller has them already)."""
        eps = self.stats.endpoints
        if not eps or self.stats.polls == 0:
            return "UNKNOWN", "no polls in the window"
        reachable = [e for e in eps.values() if e.polls > e.failed]
        if not reachable:
            first = next(iter(eps.values()))
            return "UNKNOWN", first.last_error or f"{first.url} could not be read"
        if not any(e.vllm for e in reachable):
            return "UNKNOWN", f"{reachable[0].url} exposes no vLLM metrics"
        ranked = self._ranked() if ranked is None else ranked
        counted = [t for t in ranked if t.counts is not None]
        worst = max((t.counts for t in counted if t.counts is not None), default=Severity.OK)
        down = [e.url for e in eps.values() if e.polls == e.failed]
        if worst >= Severity.WARNING:
            top = counted[0]
            serious = [t for t in counted if (t.counts or 0) >= Severity.WARNING]
            notes = [f"+{len(serious) - 1} more"] if len(serious) > 1 else []
            explains = tracks.explained_by(top, ranked)
            if explains:
                notes.append("explains " + ", ".join(explains))
            more = f" ({'; '.join(notes)})" if notes else ""
            status: Status = "CRITICAL" if worst >= Severity.CRITICAL else "WARNING"
            return (
                status,
                f"{top.finding.rule} on {top.finding.endpoint}: {top.finding.summary}{more}",
            )
        if down:
            return "WARNING", f"{down[0]} could not be read during the window"
        judging = self.undecided()
        if judging:
            more = f" (+{len(judging) - 1} more)" if len(judging) > 1 else ""
            return "UNKNOWN", f"no verdict yet: {self._progress(judging[0])}{more}"
        short = self._short_watch() or self._too_brief()
        if short is not None:
            return "UNKNOWN", short
        span = _span(self.stats.t_first, self.stats.t_last)
        polls = f"{span} ({self.stats.polls} polls)"
        if counted:
            top = counted[0]
            if len(counted) == 1:
                return "OK", (
                    f"1 info: {top.finding.rule} on {top.finding.endpoint}: "
                    f"{top.finding.summary} (nothing worse over {polls})"
                )
            rules = ", ".join(dict.fromkeys(t.finding.rule for t in counted))
            return "OK", f"{len(counted)} info: {rules} (nothing worse over {polls})"
        return "OK", f"no findings over {polls}"

    def _short_watch(self) -> str | None:
        """Why an all-clear would rest on too little: a live watch whose readings cover less
        than half the window asked for, though nobody cut it short. Its polls came late (a host
        starved of CPU, a server that answers in tens of seconds), and the little it saw
        proves nothing healthy; a script must not read OK."""
        expected, t0, t1 = self.stats.expected_s, self.stats.t_first, self.stats.t_last
        if self.source_kind != "live" or self.interrupted or not expected:
            return None
        covered = (t1 - t0) if t0 is not None and t1 is not None else 0.0
        if covered >= expected / 2:
            return None
        return (
            f"no verdict: {self.stats.polls} polls cover only {durations.span(covered)} of the "
            f"{durations.span(expected)} asked ({HELD_UP}: is this host short of CPU, or the "
            "server slow to answer?)"
        )

    def _too_brief(self) -> str | None:
        """Why an all-clear would come before any rule could have spoken: the window's polls
        span less than the quickest warning needs (`Engine.quickest_s`). A 5 s report that saw
        one wave's tail has seen nothing healthy; it says how long a window would judge."""
        t0, t1 = self.stats.t_first, self.stats.t_last
        covered = (t1 - t0) if t0 is not None and t1 is not None else 0.0
        quickest = self.monitor.engine.quickest_s
        enough_polls = self.stats.polls >= MIN_DECISIVE_POLLS
        if self.interrupted or (covered >= quickest - 1e-6 and enough_polls):
            return None
        return (
            f"no verdict: {durations.span(covered)} of polls is too short to rule anything out "
            f"(the quickest verdict needs {durations.span(quickest)}; watch longer)"
        )

    def undecided(self) -> list[Finding]:
        """Warnings still being judged at the window's end: their condition holds, their
        evidence is not in yet (INFO rules never make a report UNKNOWN), nearest to firing
        first: the reason names the rule that would speak next if nothing changed, not the
        first in root-cause order that needs minutes more."""
        waiting = [f for f in self._accruing.values() if f.severity >= Severity.WARNING]
        return sorted(waiting, key=lambda f: (f.needs_s is None, f.needs_s or 0.0))

    def _progress(self, f: Finding) -> str:
        """`budget-too-small: held for all 30 s; needs 15 s more`."""
        start = self.stats.t_first
        span = self.stats.t_last - start if start is not None and self.stats.t_last else 0.0
        if f.held_s >= span - 1.0:
            held = f"held for all {durations.span(span)}"
        elif f.held_s < 1.0:
            held = "seen at the end of the window"
        else:
            held = f"held for the last {durations.span(f.held_s)}"
        if f.needs_s is not None:
            of = f" of {f.path} evidence" if f.path else ""
            return f"{f.rule} on {f.endpoint}: {held}; needs {durations.span(f.needs_s)} more{of}"
        return f"{f.rule} on {f.endpoint}: {held}; {f.summary}"

    def _ranked(self) -> list[Track]:
        """Findings in the report's order (`tracks.ranked`)."""
        return tracks.ranked(self._tracks.values())

    def document(self) -> Document:
        findings = self._ranked()  # once: the status and the findings list read the same order
        status, reason = self.status(findings)
        st = self.stats
        endpoints = [
            endpoint_doc(e, self.monitor.endpoints.get(e.url)) for e in st.endpoints.values()
        ]
        primary = endpoints[0] if endpoints else None
        first_ep = next(iter(st.endpoints.values()), None)
        end = st.t_last
        judging = [undecided_doc(f, end) for f in self.undecided()] if end is not None else []
        signals: SignalsDoc | NoSignals = primary["signals"] if primary else {}
        advice, check = self._predictions(findings)
        return {
            "report_version": REPORT_VERSION,
            "vtop": __version__,
            "status": status,
            "exit_code": document_code(status),
            "reason": reason,
            "source": source_doc(self.source_kind, self.source_name),
            "window": window_doc(
                st.t_first, st.t_last, st.polls, evaluations=self.evaluations, step_s=self.step_s
            ),
            "endpoint": primary["url"] if primary else None,
            "knobs": primary["knobs"] if primary else {},
            "signals": signals,
            "latency": primary["latency"] if primary else {},
            "findings": [finding_doc(t, advice.get(_key(t))) for t in findings] + judging,
            "endpoints": endpoints,
            "gpus": gpu_docs(st.gpu),
            "gpu_unavailable": None if st.gpu.gpus else st.gpu.unavailable,
            "events": [event_doc(e) for e in self.events],
            "timeline": timeline_doc(first_ep.timeline.series()) if first_ep else {"t": []},
            "prediction_check": check,
        }

    def _predictions(
        self, ranked: list[Track]
    ) -> tuple[dict[tuple[str, str], Advice], PredictionCheckDoc | None]:
        """What the advice of each finding that counts will buy (`vtop.whatif.advice`), and
        the self-check of the twin the first prediction stands on."""
        advisor = self.advisor or Advisor(self.goals)
        out: dict[tuple[str, str], Advice] = {}
        check: PredictionCheckDoc | None = None
        deadline = time.monotonic() + (advisor.budget_s or PREDICT_BUDGET_S)
        for track in ranked:
            if time.monotonic() > deadline:
                break
            f = track.finding
            watched = self.monitor.watched(f.endpoint)
            reading = prediction_reading(watched, f) if track.counts is not None else ""
            if isinstance(reading, str):
                continue
            try:
                advice = advisor.advise(f, reading, deadline=deadline)
            except Exception as exc:  # the twin's failure costs the finding its prediction
                advice = unavailable(f, twin_failed(exc))
            if advice is None:
                continue
            out[_key(track)] = advice
            fitted = advisor.fitted(f.endpoint)
            if check is None and fitted is not None:
                check = check_doc(f.endpoint, reading.seen.window_s, fitted)
        return out, check


def _key(track: Track) -> tuple[str, str]:
    return (track.finding.endpoint, track.finding.rule)


def _span(t0: float | None, t1: float | None) -> str:
    if t0 is None or t1 is None:
        return "0 s"
    return durations.span(t1 - t0)


def document_code(status: Status) -> VerdictCode:
    """The verdict's exit code (`vtop.exits.verdict_code`) as the document writes it: a plain
    int, one of the schema's four, not the enum member a renderer would have to unwrap."""
    code = int(verdict_code(status))
    if code not in get_args(VerdictCode):
        raise AssertionError(f"{status} has exit code {code}, which the schema does not name")
    return cast(VerdictCode, code)
