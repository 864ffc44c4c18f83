"""The report document's records, written out literally as the typed dicts of the schema.

The document is plain JSON data, versioned (`REPORT_VERSION` in `vtop.report.collect`) and
described by docs/report-schema.json; `vtop.report.document` types it field for field (a test
holds the two together), and every record is built here as one of those typed dicts, literally,
key by key in the schema's order, so mypy checks every key the schema asks for and the JSON
reads in a stable order. Nothing here decides anything: what a finding says comes from its
`Track` (`vtop.report.tracks`), the figures from `WindowStats` (`vtop.report.window`), and
`vtop.report.collect` assembles the records into the document with its verdict.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from vtop import figures, summary
from vtop.figures import FIGURE
from vtop.model import EndpointInfo, Event, Finding
from vtop.monitor import EndpointView
from vtop.report.document import (
    BandDoc,
    CheckFamilyDoc,
    EndpointDoc,
    EndpointStatus,
    EventDoc,
    FindingDoc,
    GpuDoc,
    GpuSource,
    LatencyDoc,
    PredictionCheckDoc,
    PredictionDoc,
    SearchDoc,
    SignalDoc,
    SignalsDoc,
    SourceDoc,
    SourceKind,
    StatDoc,
    TimelineDoc,
    WindowDoc,
    severity_name,
)
from vtop.report.tracks import Track
from vtop.report.window import EndpointStats, GpuStats, Stat
from vtop.summary import AlternativeDoc
from vtop.whatif.advice import Advice, chosen_recommendations
from vtop.whatif.check import SelfCheck
from vtop.whatif.predict import Band, WhatIf
from vtop.whatif.search import Choice, Trial

knobs_json = summary.knobs


@overload
def iso(t: float) -> str: ...
@overload
def iso(t: float | None) -> str | None: ...
def iso(t: float | None) -> str | None:
    """UTC time with seconds, e.g. 2025-06-15T15:06:41Z (reports are read across zones)."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def source_doc(kind: SourceKind, name: str) -> SourceDoc:
    """What a document was made from: `{"kind": "replay", "name": "memory-ceiling.vtrace"}`
    (the report's, and `vtop whatif`'s)."""
    return {"kind": kind, "name": name}


def window_doc(
    t_first: float | None,
    t_last: float | None,
    polls: int,
    *,
    evaluations: int = 0,
    step_s: float | None = None,
) -> WindowDoc:
    """The span a document covers, in both clocks, and how it was read: its polls and the
    rule evaluations over them (a what-if runs no rules: none, and no step between them)."""
    return {
        "from": iso(t_first),
        "to": iso(t_last),
        "start_t": t_first,
        "end_t": t_last,
        "duration_s": (t_last - t_first) if t_first is not None and t_last else 0.0,
        "polls": polls,
        "evaluations": evaluations,
        "step_s": step_s,
    }


def endpoint_doc(e: EndpointStats, view: EndpointView | None) -> EndpointDoc:
    """An endpoint's figures over the window, with what the monitor knows of it (`view`)."""
    server = view.server if view is not None else EndpointInfo()

    def gauge(name: str) -> SignalDoc:
        return _signal(e.gauges[name].summary(), FIGURE[name].unit)

    def rate(name: str) -> SignalDoc:
        return _signal(e.counters[name].summary(), FIGURE[name].unit)

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
        "latency": latencies({name: lat.summary() for name, lat in e.latency.items()}),
    }


def gpu_docs(gpu: GpuStats) -> list[GpuDoc]:
    """Every GPU read in the window, by index."""
    out: list[GpuDoc] = []
    for index, (name, stats, total) in sorted(gpu.gpus.items()):
        error, since = gpu.errors.get(index, (None, None))
        out.append(
            {
                "index": index,
                "name": name,
                "mem_total_bytes": total,
                "source": _gpu_source(gpu.sources.get(index)),
                "util_pct": _gpu_stat(stats["util_pct"]),  # `GpuStats.FIELDS`, in order
                "mem_used_bytes": _gpu_stat(stats["mem_used_bytes"]),
                "power_w": _gpu_stat(stats["power_w"]),
                "temp_c": _gpu_stat(stats["temp_c"]),
                "error": error,
                "error_since": iso(since),
            }
        )
    return out


def _stat(summary: dict[str, float | None]) -> StatDoc:
    return {"avg": summary["avg"], "max": summary["max"], "last": summary["last"]}


def _gpu_stat(s: Stat) -> StatDoc | None:
    return _stat(s.summary()) if s.n else None


def _signal(summary: dict[str, float | None], unit: str) -> SignalDoc:
    return {"avg": summary["avg"], "max": summary["max"], "last": summary["last"], "unit": unit}


def latencies(stats: dict[str, dict[str, float | None]]) -> dict[str, LatencyDoc]:
    """Each latency's figures, the mean and every quantile of a part at most its whole's
    (`figures.within_wholes`): the report never says a request queued longer than it waited
    for its first token (each histogram counts requests at another moment, so a window's
    queue mean could read 16.3 s beside a TTFT mean of 14.3 s)."""
    for q in ("mean", "p50", "p90", "p99"):
        bounded = figures.within_wholes({name: s[q] for name, s in stats.items()})
        for name, s in stats.items():
            s[q] = bounded[name]
    return {name: _latency(s) for name, s in stats.items()}


def _latency(stats: dict[str, float | None]) -> LatencyDoc:
    return {
        "observations": stats["observations"],
        "mean": stats["mean"],
        "p50": stats["p50"],
        "p90": stats["p90"],
        "p99": stats["p99"],
    }


_GPU_SOURCES: dict[str, GpuSource] = {"nvml": "nvml", "page": "page"}


def _gpu_source(source: str | None) -> GpuSource | None:
    """Who read a GPU, as the schema names them (`GpuReading.source` is one of the two)."""
    return _GPU_SOURCES.get(source) if source is not None else None


def event_doc(e: Event) -> EventDoc:
    return {
        "t": e.t,
        "time": iso(e.t),
        "kind": e.kind,
        "endpoint": e.endpoint,
        "message": e.message,
    }


def timeline_doc(series: dict[str, list[float | None]]) -> TimelineDoc:
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


def finding_doc(track: Track, advice: Advice | None = None) -> FindingDoc:
    """A finding as the engine last said it, with when it fired and whether it counts, and
    what its advice will buy when the twin could predict it."""
    f = track.finding
    suppressed = f.state == "suppressed"
    recommendations = [summary.recommendation(r) for r in chosen_recommendations(f, advice)]
    if advice is not None:
        bands = {name: band_doc(b) for name, b in advice.prediction.figures.items()}
        others = [alternative_doc(t) for t in advice.choice.alternatives] if advice.choice else []
        for doc in recommendations:
            if bands and doc["knob"] in advice.prediction.changes:
                doc["predicted"] = bands
                if others:
                    doc["alternatives"] = others
    return {
        "rule": f.rule,
        "title": f.title,
        "endpoint": f.endpoint,
        "severity": severity_name(track.worst),
        "state": f.state,
        "counts": track.counts is not None,
        "summary": f.summary,
        "evidence": [{"name": n, "value": v} for n, v in f.evidence],
        "recommendations": recommendations,
        "suppressed_by": f.suppressed_by,
        "suppressed_since_t": track.state_since if suppressed else None,
        "suppressed_since": iso(track.state_since) if suppressed else None,
        "first_t": track.first_t,
        "last_t": track.last_t,
        "first": iso(track.first_t),
        "last": iso(track.last_t),
        "evaluations": track.evaluations,
        "active_at_end": track.active,
        "prediction": prediction_doc(advice) if advice is not None else None,
    }


def band_doc(b: Band) -> BandDoc:
    """A predicted figure's band, to 9 significant digits: the twin's figures are estimates,
    and a live report and the replay of its recording differ beyond that only by the
    trace's float rounding."""
    return {
        "now": _sig(b.now),
        "after": _sig(b.after),
        "low": _sig(b.low),
        "high": _sig(b.high),
        "seen": None if b.seen is None else _sig(b.seen),
    }


def _sig(v: float) -> float:
    return float(f"{v:.9g}")


def alternative_doc(t: Trial) -> AlternativeDoc:
    """A configuration the search ran beside the one recommended, as data."""
    bands = {name: band_doc(b) for name, b in t.prediction.figures.items()}
    return {
        "changes": dict(t.changes),
        "flags": t.label(),
        "predicted": bands,
        "misses": list(t.misses),
        "line": t.line(),
    }


def search_doc(choice: Choice) -> SearchDoc:
    """How the twin chose the configuration a finding's prediction is of."""
    return {
        "goals": choice.goals.describe(),
        "checked": choice.checked,
        "moved": choice.moved,
        "meets": choice.chosen.meets,
        "keeps_today": choice.keeps_today,
        "formula": dict(choice.formula.changes),
        "note": choice.note,
        "tried": len(choice.trials),
        "cut_short": choice.cut_short,
        "line": choice.line(),
    }


def prediction_doc(advice: Advice) -> PredictionDoc:
    """A finding's predicted effect as data (`vtop.whatif.advice.Advice`)."""
    p = advice.prediction
    doc: PredictionDoc = {
        "changes": dict(p.changes),
        "confidence": p.confidence,
        "reason": p.reason or None,
        "line": advice.line(),
        "promised": advice.promised,
        "gain": advice.gain,
        "demoted": advice.demoted,
        "verdict": advice.verdict() or None,
        "withheld": dict(p.withheld),
    }
    if advice.choice is not None:
        doc["search"] = search_doc(advice.choice)
    return doc


def families_doc(check: SelfCheck) -> dict[str, CheckFamilyDoc]:
    """Each family's self-check verdict as data (the report's and `vtop whatif`'s JSON)."""
    return {
        name: {
            "worst": v.worst,
            "error": v.error,
            "measure": "factor" if name == "latency" else "relative",
            "withheld": v.withheld,
            "reason": v.reason or None,
        }
        for name, v in check.families.items()
    }


def check_doc(endpoint: str, window_s: float, whatif: WhatIf) -> PredictionCheckDoc:
    """The twin at today's knobs against the observed figures: what every prediction of
    the report stands on."""
    c = whatif.check
    return {
        "endpoint": endpoint,
        "window_s": window_s,
        "observed": dict(c.observed),
        "twin": dict(c.twin),
        "errors": dict(c.errors),
        "confidence": c.confidence,
        "reason": c.reason or None,
        "families": families_doc(c),
        "read": list(whatif.read),
        "assumed": list(whatif.assumed),
    }


def undecided_doc(f: Finding, end: float) -> FindingDoc:
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
        "missing": list(f.missing),
    }
