"""A /metrics page -> the canonical series of one `Scrape`.

`PageReader` is kept per endpoint for the life of the connection: the first page teaches it
where every line goes (`_LineRoute`, cached by the line's head), and every later page costs a
string split, a dict lookup and a `float()` per line. Lines of metrics vtop does not know
(python_gc_*, http_*, ...) are routed to nowhere once and skipped after that.

Series are keyed by `(signal, model, engine, label)`. Labels beyond those (the `pid` label of
multiprocess mode, labels a proxy adds) do not split a series: the samples they separate are
combined, adding counts and histogram buckets and taking the largest gauge. A line repeated
verbatim counts once (the last one wins). NaN and ±Inf samples are not measurements and are
dropped. Label values are made inert here, before anything can print them (`clean_label`:
`vtop.untrusted`'s rule, control and bidi characters removed, long values cut).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vtop import untrusted
from vtop.model import Histogram, Scrape, SeriesKey
from vtop.signals.catalog import WIRE, Kind, Signal
from vtop.signals.gpus import PAGE_GPU_NAME
from vtop.signals.parser import ParseError, parse_head, parse_value, split_sample

MAX_LABEL = 200
"""Longest label value kept; a longer one is cut and marked with an ellipsis."""


def clean_label(value: str) -> str:
    """A label value that is safe to print (`untrusted.clean`), at most MAX_LABEL long."""
    return untrusted.clean(value, MAX_LABEL)


@dataclass(frozen=True, slots=True)
class _LineRoute:
    signal: Signal
    part: str
    rank: int
    key: SeriesKey
    le: float | None
    merged: bool
    """True when labels beyond model/engine/label were folded away (pid, proxy labels)."""
    info: tuple[tuple[str, str], ...] = ()
    fast: int = 0
    """The common cases the read loop handles inline: rank 0, nothing merged (see `_FAST`)."""
    scale: float = 1.0
    gpu_name: str = ""
    """A dcgm-exporter series' `modelName` label: the card its `gpu` index names."""


@dataclass(slots=True)
class _HistParts:
    rank: int
    buckets: dict[float, float] = field(default_factory=dict)
    sum: float | None = None
    count: float | None = None


_IGNORED = None


def _route(head: str, lineno: int) -> _LineRoute | None:
    name, labels = parse_head(head, lineno)
    wire = WIRE.get(name)
    if wire is None:
        return _IGNORED
    sig = wire.signal
    model = engine = label = ""
    le: float | None = None
    extra = False
    gpu_name = ""
    for k, v in labels:
        if k == "model_name":
            model = clean_label(v)
        elif k == "engine":
            engine = clean_label(v)
        elif sig.label is not None and k == sig.label:
            label = clean_label(v)
        elif k == "le" and wire.part == "bucket":
            le = parse_value(v, lineno)
        elif sig.kind is not Kind.INFO:
            extra = True
            if k == "modelName" and sig.label == "gpu":
                gpu_name = clean_label(v)
    if wire.part == "bucket" and le is None:
        raise ParseError(f"histogram bucket {name} has no 'le' label", lineno)
    info = tuple((k, clean_label(v)) for k, v in labels) if sig.kind is Kind.INFO else ()
    fast = 0
    if wire.rank == 0 and not extra and sig.kind is not Kind.INFO:
        fast = _FAST[wire.part] if sig.kind is Kind.HISTOGRAM else _SCALAR
    key = SeriesKey(sig.name, model, engine, label)
    return _LineRoute(sig, wire.part, wire.rank, key, le, extra, info, fast, sig.scale, gpu_name)


_SCALAR, _BUCKET, _SUM, _COUNT = 1, 2, 3, 4
_FAST = {"bucket": _BUCKET, "sum": _SUM, "count": _COUNT}


class PageReader:
    """Reads the pages of one endpoint; remembers where each line goes."""

    def __init__(self) -> None:
        self._routes: dict[str, _LineRoute | None] = {}

    def read(
        self,
        text: str,
        *,
        endpoint: str,
        t: float,
        latency_s: float | None = None,
        size_bytes: int | None = None,
    ) -> Scrape:
        """Parse a page into a `Scrape`. Raises `ParseError` on a page that is not metrics."""
        routes = self._routes
        if len(routes) > 50_000:  # a page that invents new series forever must not grow us
            routes.clear()
        if text.lstrip()[:1] == "<":
            raise ParseError("not the Prometheus text format (the page looks like HTML)", 1)
        best: dict[SeriesKey, tuple[int, float]] = {}
        merged: dict[str, tuple[_LineRoute, float]] = {}
        hists: dict[SeriesKey, _HistParts] = {}
        info: dict[str, str] = {}
        vllm_lines = 0
        get = routes.get
        isfinite = math.isfinite
        for lineno, line in enumerate(text.split("\n"), 1):
            if not line or line[0] == "#":
                continue
            # Fast path: "head value" split at the last space, head already known.
            head, _, value_text = line.rpartition(" ")
            route = get(head, _MISSING)
            if route is None:
                continue
            if route is _MISSING or not isinstance(route, _LineRoute):
                if line.isspace() or line == "\r":
                    continue
                exact_head, value_text = split_sample(line.rstrip("\r"), lineno)
                route = get(exact_head, _MISSING)
                if route is _MISSING:
                    route = _route(exact_head, lineno)
                    routes[exact_head] = route
                if route is None:
                    continue
                assert isinstance(route, _LineRoute)
            try:
                if "_" in value_text:  # float() takes 1_000; the format does not
                    raise ValueError
                value = float(value_text)
            except ValueError:
                value = parse_value(value_text.strip(), lineno)
            if route.signal.vllm:
                vllm_lines += 1
            fast = route.fast
            if fast and isfinite(value):
                if fast == _SCALAR:
                    best[route.key] = (0, value * route.scale)
                    continue
                parts = hists.get(route.key)
                if parts is None or parts.rank:
                    parts = hists[route.key] = _HistParts(0)
                if fast == _BUCKET:
                    parts.buckets[route.le] = value  # type: ignore[index]
                elif fast == _SUM:
                    parts.sum = value
                else:
                    parts.count = value
                continue
            if route.merged:
                merged[head] = (route, value)
                continue
            _take(route, value, best, hists, info)
        for route, value in merged.values():
            _take(route, value, best, hists, info, merge=True)
            if route.gpu_name:
                info[PAGE_GPU_NAME + route.key.label] = route.gpu_name
        return Scrape(
            endpoint=endpoint,
            t=t,
            latency_s=latency_s,
            size_bytes=len(text) if size_bytes is None else size_bytes,
            scalars={k: v for k, (_, v) in best.items()},
            histograms=_histograms(hists),
            info=info,
            has_vllm_series=vllm_lines > 0,
        )


_MISSING = object()


def _take(
    route: _LineRoute,
    value: float,
    best: dict[SeriesKey, tuple[int, float]],
    hists: dict[SeriesKey, _HistParts],
    info: dict[str, str],
    merge: bool = False,
) -> None:
    if not math.isfinite(value):
        return
    sig = route.signal
    key = route.key
    if sig.kind is Kind.INFO:
        if not any(k for k in info if not k.startswith(PAGE_GPU_NAME)):
            info.update(route.info)
        return
    if sig.kind is Kind.HISTOGRAM:
        parts = hists.get(key)
        if parts is None or route.rank < parts.rank:
            parts = hists[key] = _HistParts(route.rank)
        elif route.rank > parts.rank:
            return
        if route.part == "bucket":
            assert route.le is not None
            parts.buckets[route.le] = parts.buckets.get(route.le, 0.0) + value if merge else value
        elif route.part == "sum":
            parts.sum = (parts.sum or 0.0) + value if merge else value
        else:
            parts.count = (parts.count or 0.0) + value if merge else value
        return
    value *= sig.scale
    old = best.get(key)
    if old is not None and old[0] < route.rank:
        return
    if merge and old is not None and old[0] == route.rank:
        value = old[1] + value if sig.kind is Kind.COUNTER else max(old[1], value)
    best[key] = (route.rank, value)


def _histograms(hists: dict[SeriesKey, _HistParts]) -> dict[SeriesKey, Histogram]:
    out: dict[SeriesKey, Histogram] = {}
    for key, parts in hists.items():
        inf = parts.buckets.pop(math.inf, None)
        count = inf if inf is not None else parts.count
        if count is None:
            continue  # neither a +Inf bucket nor a count: nothing to compute from
        bounds = tuple(sorted(b for b in parts.buckets if math.isfinite(b)))
        out[key] = Histogram(
            bounds=bounds,
            buckets=tuple(parts.buckets[b] for b in bounds),
            count=count,
            sum=parts.sum if parts.sum is not None else math.nan,
        )
    return out
