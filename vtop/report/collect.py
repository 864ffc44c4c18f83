"""From frames to a verdict: the report document that every format renders.

One path for every source: frames (live, simulated, replayed) go into a `Monitor`, exactly as
the TUI feeds them, and the rules' findings are read back from it after each evaluation;
the same frames also go into `WindowStats` for the window's figures. A long trace cannot be
evaluated at every poll in the time a script allows, so `observe(frame, light=True)` takes a
light frame for the figures only; what such polls announce is not lost by skipping: their
knobs and server info go to the monitor at once (`Monitor.configure`; the document reads them
from there, as the screens do), their events with the next evaluated frame.

A finding is reported if it fired, or was explained away (suppressed) by a root cause, at any
evaluation of the window, with the first and last time it did. What it says is what the live
engine said at its last such evaluation: its state then (firing, or suppressed by which rule and
since when), summary, evidence and advice, so the report never contradicts the screen.

A rule whose condition still holds at the window's end while its evidence accrues (pending, or
waiting for requests to finish) is no verdict, and no all-clear either: it is reported with its
progress, and when nothing at WARNING or above fired, the status is UNKNOWN (exit 3) with what a
longer report would need ("budget-too-small: held for all 30 s; needs 15 s more"), never OK. A
script acting on the exit code must not read "fine" for a server vtop is still judging.

The status counts a finding's firing only if no root cause came to explain it in the same
episode (a run of evaluations where it fires or is suppressed): a symptom that fires before
its cause has waited out its own `for` is the same problem, seen early, and the cause's finding
carries it. The headline leads with what counts, worst first, then what still fires at the
end, in the engine's root-cause order. The document is plain JSON data, versioned
(`REPORT_VERSION`) and described by docs/report-schema.json; `vtop.report.document` types it
field for field (a test holds the two together), and it is built here as those typed records,
literally, so mypy checks every key the schema asks for. Text, Markdown and HTML are views of
it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final, overload

from vtop import __version__, durations, summary
from vtop.model import ACCRUING, EndpointInfo, Event, Finding, Frame, Severity
from vtop.monitor import Monitor
from vtop.report.document import (
    Document,
    EndpointDoc,
    EndpointStatus,
    EventDoc,
    ExitCode,
    FindingDoc,
    GpuDoc,
    GpuSource,
    LatencyDoc,
    NoSignals,
    SignalDoc,
    SignalsDoc,
    SourceKind,
    StatDoc,
    Status,
    TimelineDoc,
    severity_name,
)
from vtop.report.window import EndpointStats, Stat, WindowStats

REPORT_VERSION: Final = 1
EXIT_CODES: dict[str, ExitCode] = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
FindingsFn = Callable[[Monitor], Iterable[Finding]]
"""Every current finding of every endpoint the monitor watches."""
MAX_EVENTS = 200

UNITS = {
    "running": "requests",
    "waiting": "requests",
    "kv_usage": "ratio",
    "preemptions_per_s": "1/s",
    "generation_tokens_per_s": "tokens/s",
    "prompt_tokens_per_s": "tokens/s",
    "requests_per_s": "requests/s",
}


def monitor_findings(monitor: Monitor) -> Iterable[Finding]:
    """The findings the monitor's rule engine holds for every endpoint after the last feed."""
    out: list[Finding] = []
    for view in monitor.endpoints.values():
        out.extend(getattr(view, "findings", ()))
    return out


@overload
def iso(t: float) -> str: ...
@overload
def iso(t: float | None) -> str | None: ...
def iso(t: float | None) -> str | None:
    """UTC time with seconds, e.g. 2025-06-15T15:06:41Z (reports are read across zones)."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class _Track:
    finding: Finding
    """The finding at the last evaluation it fired or was suppressed: what the engine says."""
    first_t: float
    last_t: float
    worst: Severity
    evaluations: int = 1
    active: bool = True
    starts: list[float] = field(default_factory=list)
    """Times it began firing (again): where a replay's timeline puts its marks."""
    onset: Finding | None = None
    """The finding as it was when it first fired: what training reveals."""
    state_since: float = 0.0
    """When its current state (firing, or suppressed by the same rule) began."""
    rank: int = 0
    """Its place in the engine's order at its last evaluation (firing, severity, root cause)."""
    episode: Severity | None = None
    """The worst it fired at in the current episode since a root cause last explained it."""
    counted: Severity | None = None
    """The worst it fired at in episodes that ended unexplained."""

    def observe(self, f: Finding, t: float, rank: int) -> None:
        """One more evaluation at which it fires or is suppressed."""
        if (f.state, f.suppressed_by) != (self.finding.state, self.finding.suppressed_by):
            self.state_since = t
        firing = f.state == "firing"
        if firing and (not self.active or self.onset is None):
            self.starts.append(t)
        if firing and self.onset is None:
            self.onset = f
        if firing:
            self.episode = f.severity if self.episode is None else max(self.episode, f.severity)
        else:  # a root cause explains it: what it said before is that cause's to carry
            self.episode = None
        self.finding, self.worst, self.rank = f, max(self.worst, f.severity), rank
        self.last_t = t
        self.evaluations += 1
        self.active = True

    def end_episode(self) -> None:
        """It stopped firing and stopped being explained: its episode is settled."""
        if self.active and self.episode is not None:
            self.counted = self.episode if self.counted is None else max(self.counted, self.episode)
        self.episode = None
        self.active = False

    @property
    def counts(self) -> Severity | None:
        """The severity it adds to the status, or None when every firing was explained."""
        levels = [s for s in (self.counted, self.episode) if s is not None]
        return max(levels) if levels else None

    @property
    def firing_at_end(self) -> bool:
        return self.active and self.finding.state == "firing"


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
    ) -> None:
        self.source_kind = source_kind
        self.source_name = source_name
        self.monitor = monitor or Monitor(capacity=capacity)
        self.stats = WindowStats(expected_s)
        self._findings = findings
        self._tracks: dict[tuple[str, str], _Track] = {}
        self._accruing: dict[tuple[str, str], Finding] = {}
        """Findings whose condition held at the last evaluation while their evidence accrued."""
        self._pending_events: list[Event] = []
        """Events of polls observed since the last evaluated one, for the monitor's history."""
        self.events: list[Event] = []
        self.evaluations = 0
        self.last_evaluated: float | None = None
        self.step_s: float | None = None

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
                self._tracks[key] = _Track(
                    f, t, t, f.severity, starts=[t] if firing else [],
                    onset=f if firing else None, state_since=t, rank=rank,
                    episode=f.severity if firing else None,
                )  # fmt: skip
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

    def status(self, ranked: list[_Track] | None = None) -> tuple[Status, str]:
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
            explains = self._explained_by(top, ranked)
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

    def undecided(self) -> list[Finding]:
        """Warnings still being judged at the window's end: their condition holds, their
        evidence is not in yet (INFO rules never make a report UNKNOWN)."""
        return [f for f in self._accruing.values() if f.severity >= Severity.WARNING]

    def _progress(self, f: Finding) -> str:
        """`budget-too-small: held for all 30 s; needs 15 s more`."""
        start = self.stats.t_first
        span = self.stats.t_last - start if start is not None and self.stats.t_last else 0.0
        held = (f"held for all {durations.span(span)}" if f.held_s >= span - 1.0
                else f"held for the last {durations.span(f.held_s)}")  # fmt: skip
        if f.needs_s is not None:
            return f"{f.rule} on {f.endpoint}: {held}; needs {durations.span(f.needs_s)} more"
        return f"{f.rule} on {f.endpoint}: {held}; {f.summary}"

    def _ranked(self) -> list[_Track]:
        """Findings in the report's order: those that count for the status first, worst first,
        then what still fires at the end in the engine's root-cause order, then the rest."""

        def key(t: _Track) -> tuple[int, int, int, int, float]:
            level = t.counts if t.counts is not None else t.worst
            return (t.counts is None, -level, not t.firing_at_end, t.rank, t.first_t)

        return sorted(self._tracks.values(), key=key)

    def _explained_by(self, cause: _Track, ranked: list[_Track]) -> list[str]:
        """The rules `cause` explains (suppresses) at the end of the window, in `ranked`'s
        order."""
        return [
            t.finding.rule
            for t in ranked
            if t.active
            and t.finding.state == "suppressed"
            and t.finding.suppressed_by == cause.finding.rule
            and t.finding.endpoint == cause.finding.endpoint
        ]

    def document(self) -> Document:
        findings = self._ranked()  # once: the status and the findings list read the same order
        status, reason = self.status(findings)
        st = self.stats
        endpoints = [self._endpoint(e) for e in st.endpoints.values()]
        primary = endpoints[0] if endpoints else None
        duration = (st.t_last - st.t_first) if st.t_first is not None and st.t_last else 0.0
        first_ep = next(iter(st.endpoints.values()), None)
        end = st.t_last
        judging = [_undecided(f, end) for f in self.undecided()] if end is not None else []
        signals: SignalsDoc | NoSignals = primary["signals"] if primary else {}
        return {
            "report_version": REPORT_VERSION,
            "vtop": __version__,
            "status": status,
            "exit_code": EXIT_CODES[status],
            "reason": reason,
            "source": {"kind": self.source_kind, "name": self.source_name},
            "window": {
                "from": iso(st.t_first),
                "to": iso(st.t_last),
                "start_t": st.t_first,
                "end_t": st.t_last,
                "duration_s": duration,
                "polls": st.polls,
                "evaluations": self.evaluations,
                "step_s": self.step_s,
            },
            "endpoint": primary["url"] if primary else None,
            "knobs": primary["knobs"] if primary else {},
            "signals": signals,
            "latency": primary["latency"] if primary else {},
            "findings": [_finding(t) for t in findings] + judging,
            "endpoints": endpoints,
            "gpus": self._gpus(),
            "gpu_unavailable": None if st.gpu.gpus else st.gpu.unavailable,
            "events": [_event(e) for e in self.events],
            "timeline": _timeline(first_ep.timeline.series()) if first_ep else {"t": []},
        }

    def _endpoint(self, e: EndpointStats) -> EndpointDoc:
        view = self.monitor.endpoints.get(e.url)
        server = view.server if view is not None else EndpointInfo()

        def gauge(name: str) -> SignalDoc:
            return _signal(e.gauges[name].summary(), UNITS[name])

        def rate(name: str) -> SignalDoc:
            return _signal(e.counters[name].summary(), UNITS[name])

        signals: SignalsDoc = {  # the gauges (`GAUGES`), then the rates (`RATES`), in order
            "running": gauge("running"),
            "waiting": gauge("waiting"),
            "kv_usage": gauge("kv_usage"),
            "preemptions_per_s": rate("preemptions_per_s"),
            "generation_tokens_per_s": rate("generation_tokens_per_s"),
            "prompt_tokens_per_s": rate("prompt_tokens_per_s"),
            "requests_per_s": rate("requests_per_s"),
        }
        state: EndpointStatus = "ok"
        if e.polls == e.failed:
            state = "unreachable"
        elif not e.vllm:
            state = "no_vllm"
        elif e.failed:
            state = "partial"
        return {
            "url": e.url,
            "status": state,
            "error": e.last_error,
            "server": {
                "version": server.version,
                "models": list(server.models),
                "max_model_len": server.max_model_len,
            },
            "polls": e.polls,
            "failed_polls": e.failed,
            "restarts": e.restarts,
            "knobs": knobs_json(view.knobs if view is not None else {}),
            "signals": signals,
            "latency": {name: _latency(lat.summary()) for name, lat in e.latency.items()},
        }

    def _gpus(self) -> list[GpuDoc]:
        out: list[GpuDoc] = []
        for index, (name, stats, total) in sorted(self.stats.gpu.gpus.items()):
            error, since = self.stats.gpu.errors.get(index, (None, None))
            out.append({
                "index": index,
                "name": name,
                "mem_total_bytes": total,
                "source": _gpu_source(self.stats.gpu.sources.get(index)),
                "util_pct": _gpu_stat(stats["util_pct"]),  # `GpuStats.FIELDS`, in order
                "mem_used_bytes": _gpu_stat(stats["mem_used_bytes"]),
                "power_w": _gpu_stat(stats["power_w"]),
                "temp_c": _gpu_stat(stats["temp_c"]),
                "error": error,
                "error_since": iso(since),
            })  # fmt: skip
        return out


def _stat(summary: dict[str, float | None]) -> StatDoc:
    return {"avg": summary["avg"], "max": summary["max"], "last": summary["last"]}


def _gpu_stat(s: Stat) -> StatDoc | None:
    return _stat(s.summary()) if s.n else None


def _signal(summary: dict[str, float | None], unit: str) -> SignalDoc:
    return {"avg": summary["avg"], "max": summary["max"], "last": summary["last"], "unit": unit}


def _latency(stats: dict[str, float | None]) -> LatencyDoc:
    return {"observations": stats["observations"], "mean": stats["mean"], "p50": stats["p50"],
            "p90": stats["p90"], "p99": stats["p99"]}  # fmt: skip


_GPU_SOURCES: dict[str, GpuSource] = {"nvml": "nvml", "page": "page"}


def _gpu_source(source: str | None) -> GpuSource | None:
    """Who read a GPU, as the schema names them (`GpuReading.source` is one of the two)."""
    return _GPU_SOURCES.get(source) if source is not None else None


def _event(e: Event) -> EventDoc:
    return {"t": e.t, "time": iso(e.t), "kind": e.kind, "endpoint": e.endpoint,
            "message": e.message}  # fmt: skip


def _timeline(series: dict[str, list[float | None]]) -> TimelineDoc:
    """`Timeline.series()` as the schema names it: the bins' times, then each charted series
    (`window.CHART`, in order)."""
    return {
        "t": [t for t in series["t"] if t is not None],  # every bin has its middle
        "running": series["running"],
        "waiting": series["waiting"],
        "kv_usage": series["kv_usage"],
        "preemptions_per_s": series["preemptions_per_s"],
        "generation_tokens_per_s": series["generation_tokens_per_s"],
        "ttft_p90": series["ttft_p90"],
    }


knobs_json = summary.knobs


def _finding(track: _Track) -> FindingDoc:
    f = track.finding
    suppressed = f.state == "suppressed"
    return {
        "rule": f.rule,
        "title": f.title,
        "endpoint": f.endpoint,
        "severity": severity_name(track.worst),
        "state": f.state,
        "counts": track.counts is not None,
        "summary": f.summary,
        "evidence": [{"name": n, "value": v} for n, v in f.evidence],
        "recommendations": [summary.recommendation(r) for r in f.recommendations],
        "suppressed_by": f.suppressed_by,
        "suppressed_since_t": track.state_since if suppressed else None,
        "suppressed_since": iso(track.state_since) if suppressed else None,
        "first_t": track.first_t,
        "last_t": track.last_t,
        "first": iso(track.first_t),
        "last": iso(track.last_t),
        "evaluations": track.evaluations,
        "active_at_end": track.active,
    }


def _undecided(f: Finding, end: float) -> FindingDoc:
    """A warning still being judged at the window's end: its progress, and no advice."""
    first = f.since if f.since is not None else end
    return {
        "rule": f.rule,
        "title": f.title,
        "endpoint": f.endpoint,
        "severity": severity_name(f.severity),
        "state": f.state,
        "counts": False,
        "summary": f.summary,
        "evidence": [{"name": n, "value": v} for n, v in f.evidence],
        "recommendations": [],
        "suppressed_by": None,
        "suppressed_since_t": None,
        "suppressed_since": None,
        "first_t": first,
        "last_t": end,
        "first": iso(first),
        "last": iso(end),
        "active_at_end": True,
        "held_s": round(f.held_s, 3),
        "needs_s": None if f.needs_s is None else round(f.needs_s, 3),
    }


def _span(t0: float | None, t1: float | None) -> str:
    if t0 is None or t1 is None:
        return "0 s"
    return durations.span(t1 - t0)


def exit_code(status: str, fail_on: str = "warning") -> int:
    """The process exit code: UNKNOWN is always 3; below `fail_on`, a status exits 0."""
    code = EXIT_CODES[status]
    if status == "UNKNOWN":
        return code
    threshold = EXIT_CODES[fail_on.upper()]
    return code if code >= threshold else 0
