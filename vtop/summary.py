"""What the history says now, as plain data: the shared body of `--once`, JSON reports and tests.

Every number is a figure of `vtop.figures`, the layer the dashboard's panels and fleet rows
read too; this module only chooses which and writes them as JSON.

Gauges report their last value and window statistics; counters their total and per-second
increase; histograms the rate of observations and percentiles of the observations that arrived
within the window (bucket deltas). Unknown is `None` (JSON `null`), never 0. GPU series are
kept apart from the server's signals: each endpoint lists its GPUs with their source (the
page's dcgm-exporter series, or this host's NVML).

A knob and a recommendation are written alike here and in the report, so their shapes are
TypedDicts of this module (`KnobDoc`, `RecommendationDoc`): the report's types
(`vtop.report.document`) sit above this layer and name them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

from vtop import figures
from vtop.knobs import KnobValue
from vtop.model import ALL, Finding, GpuStatus, Knob, Provenance, Recommendation, SeriesKey
from vtop.monitor import EndpointView
from vtop.signals.catalog import SIGNALS, Kind, Signal
from vtop.signals.store import Store

Json = dict[str, Any]


class KnobDoc(TypedDict):
    """A knob's value and where it came from, as `--once` and the report write it."""

    value: KnobValue
    provenance: Provenance
    detail: str


class BandDoc(TypedDict):
    """A predicted figure: today's (the server's for tokens/s and ITL, else the twin's), after
    the change, the band around it, and what the server showed today (None where it showed
    none)."""

    now: float
    after: float
    low: float
    high: float
    seen: float | None


class AlternativeDoc(TypedDict):
    """A configuration the twin's search ran beside the one recommended, and its trade-off."""

    changes: dict[str, KnobValue]
    flags: str
    predicted: dict[str, BandDoc]
    misses: list[str]
    """The goals it misses, in words ("1.8 preemptions/s"); empty when it meets them."""
    line: str
    """The trade-off in words: `--max-num-seqs 12: gen tok/s 408 (+11%), 1.8 preemptions/s`."""


RecommendationDoc = TypedDict(
    "RecommendationDoc",
    {
        "knob": str,
        "from": KnobValue,
        "to": KnobValue,
        "flag": str,
        "engine_arg": NotRequired[str],
        "direction": NotRequired[Literal["raise", "lower", "set", "enable", "disable"]],
        "formula": NotRequired[str],
        "explanation": NotRequired[str],
        "change": NotRequired[str],
        "confidence": NotRequired[Literal["high", "medium", "low"]],
        "tradeoff": NotRequired[str],
        "assumed": NotRequired[bool],
        "predicted": NotRequired[dict[str, "BandDoc"]],
        "alternatives": NotRequired[list["AlternativeDoc"]],
    },
)
"""A recommendation as `--once` and the report write it (functional: `from` is a keyword);
every key but `predicted` is always written, those after `flag` are optional in the report's
schema, which documents began without them; `predicted` is the report's, on a recommendation
the twin could run (`vtop.whatif.advice`), and `alternatives` the other configurations its
search shows beside the choice (`vtop.whatif.search`)."""


def _round(v: float | None, digits: int = 6) -> float | None:
    return None if v is None else round(v, digits)


def signal_summary(store: Store, sig: Signal, k: SeriesKey, window_s: float | None) -> Json | None:
    """One series' numbers over the window (`vtop.figures`), or None when the store never
    saw it."""
    if sig.kind is Kind.HISTOGRAM:
        if store.hist_last(k) is None:
            return None
        lat = figures.latency_window(store, k, window_s)
        return {
            "observations": _round(lat.observations),
            "per_s": _round(lat.per_s),
            "mean": _round(lat.mean),
            "p50": _round(lat.p50),
            "p90": _round(lat.p90),
            "p99": _round(lat.p99),
        }
    if store.count(k, None) == 0:
        return None
    if sig.kind is Kind.COUNTER:
        c = figures.counter_window(store, k, window_s)
        return {"total": _round(c.total), "per_s": _round(c.per_s)}
    g = figures.gauge_window(store, k, window_s)
    return {
        "last": _round(g.last),
        "avg": _round(g.avg),
        "min": _round(g.min),
        "max": _round(g.max),
    }


def signals(
    store: Store, window_s: float | None = None, *, model: str = ALL, engine: str = ALL
) -> Json:
    """Every signal the store holds, for one model/engine or the aggregate."""
    out: Json = {}
    for sig in SIGNALS:
        if sig.kind is Kind.INFO or sig.label == "gpu":
            continue
        if sig.label is None:
            value = signal_summary(store, sig, SeriesKey(sig.name, model, engine, ""), window_s)
            if value is not None:
                out[sig.name] = value
            continue
        by_label = {}
        for label in store.labels(sig.name):
            value = signal_summary(store, sig, SeriesKey(sig.name, model, engine, label), window_s)
            if value is not None:
                by_label[label] = value
        if by_label:
            out[sig.name] = by_label
    return out


GPU_SIGNALS = tuple(sig for sig in SIGNALS if sig.label == "gpu")
PAGE_GPU = "page (dcgm-exporter series on /metrics)"
NVML_GPU = "nvml (this host's driver)"


def endpoint_gpus(
    store: Store, window_s: float | None = None, *, nvml: GpuStatus | None = None
) -> list[Json]:
    """The GPUs the endpoint's history holds, each with where its readings come from.

    A page may carry dcgm-exporter series (the simulator does, and a remote server or a
    sidecar may): those GPUs are the server's even when this host has no NVIDIA driver. On a
    local endpoint NVML's readings replace the page's for the same GPU index (`nvml`: the
    local reading, when there is one), so each GPU has one source.
    """
    local = {str(g.index) for g in nvml.gpus} if nvml is not None else set()
    labels = sorted(
        {label for sig in GPU_SIGNALS for label in store.labels(sig.name)},
        key=lambda x: (len(x), x),
    )
    out: list[Json] = []
    for label in labels:
        values: Json = {}
        for sig in GPU_SIGNALS:
            value = signal_summary(store, sig, SeriesKey(sig.name, "", "", label), window_s)
            if value is not None:
                values[sig.name] = value
        if values:
            source = NVML_GPU if label in local else PAGE_GPU
            out.append({"gpu": label, "source": source, "signals": values})
    return out


def recommendation(r: Recommendation) -> RecommendationDoc:
    """A recommendation as data: the knob, from, to, and the flag that applies it."""
    return {
        "knob": r.knob,
        "from": r.current.value if r.current is not None else None,
        "to": r.new_value,
        "flag": r.flag,
        "engine_arg": r.engine_arg,
        "direction": r.direction,
        "formula": r.formula,
        "explanation": r.explanation,
        "change": r.change,
        "confidence": r.confidence,
        "tradeoff": r.tradeoff,
        "assumed": r.current.assumed if r.current is not None else True,
    }


def finding(f: Finding) -> Json:
    """A finding as data (the current evaluation's view of it)."""
    return {
        "rule": f.rule,
        "title": f.title,
        "severity": f.severity.name,
        "state": f.state,
        "summary": f.summary,
        "evidence": [{"name": n, "value": v} for n, v in f.evidence],
        "recommendations": [recommendation(r) for r in f.recommendations],
        "suppressed_by": f.suppressed_by,
        "held_s": round(f.held_s, 3),
        "for_s": f.for_s,
    }


def knobs(values: Mapping[str, Knob]) -> dict[str, KnobDoc]:
    return {
        name: {"value": k.value, "provenance": k.provenance, "detail": k.detail}
        for name, k in sorted(values.items())
    }


def gpus(status: GpuStatus) -> Json:
    return {
        "unavailable": status.unavailable,
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "util_pct": g.util_pct,
                "mem_used_bytes": g.mem_used_bytes,
                "mem_total_bytes": g.mem_total_bytes,
                "power_w": g.power_w,
                "power_limit_w": g.power_limit_w,
                "temp_c": g.temp_c,
                "sm_clock_mhz": g.sm_clock_mhz,
                "process_mem_bytes": g.process_mem_bytes,
                "error": g.error,
            }
            for g in status.gpus
        ],
    }


def endpoint(
    view: EndpointView, window_s: float | None = None, *, nvml: GpuStatus | None = None
) -> Json:
    """One endpoint: status, what the server says, its configuration, its signals, its GPUs
    (`nvml`: this host's reading, for a local endpoint)."""
    store = view.store
    last = view.last
    engines = store.engines()
    return {
        "url": store.endpoint,
        "status": "ok" if last is not None and last.ok else "error",
        "error": last.error if last is not None else "never polled",
        "server": {
            "version": view.server.version,
            "models": list(view.server.models),
            "max_model_len": view.server.max_model_len,
        },
        "config": knobs(view.knobs),
        "polls": store.polls,
        "failed_polls": store.failed_polls,
        "restarts": len(store.restarts()),
        "findings": [finding(f) for f in view.findings],
        "signals": signals(store, window_s),
        "gpus": endpoint_gpus(store, window_s, nvml=nvml if view.local else None),
        "engines": [
            {"model": m, "engine": e, "signals": signals(store, window_s, model=m, engine=e)}
            for m, e in engines
        ]
        if len(engines) > 1
        else [],
    }
