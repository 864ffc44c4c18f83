"""Query results into vtop's values: which targets there are, and a Scrape per target scrape.

The series of one target become the text of a page (`name{labels} value` lines, the target
labels `job` and `instance` dropped) and go through the same `PageReader` as a scraped page:
the catalog's routing (aliases across vLLM versions, `model_name` / `engine` keys, merging of
extra labels, dropping NaN) is applied once, in one place, so a Scrape from Prometheus is the
Scrape the server's own page would have given. dcgm-exporter series of the node an instance
runs on (same host in `instance`, or a `Hostname` label naming it) join that page, and the
catalog routes them to the `gpu_*` signals per GPU: remote GPUs without NVML.

Prometheus's answers are trusted no more than a page is: a series whose labels are not a map of
label names to strings, or a metric name that is not one, is skipped, and a value becomes the
page's text only as the number it parses to, written back by vtop (`_number`): a "value" with
a newline in it cannot add a line of its own to the page, and a timestamp that is not a number
is no step of a backfill.

Nothing here makes a request or keeps a clock: an instant query's vector or a range query's
matrix comes in, per-target samples (`Sorter`) and Scrapes come out, so the source decides
only when to ask and how the answers become frames. What a result series is (`classify`) is
worked out once per series and remembered by the source (`Classifier`): every poll's answer
and every step of a backfill repeat the same series.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vtop.model import ALL, EndpointInfo, Knob, Scrape, SeriesKey
from vtop.signals.extract import PageReader, clean_label
from vtop.signals.parser import ParseError
from vtop.sources import discovery, promql

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


def _well_formed(metric: Mapping[Any, Any]) -> bool:
    """Label names that a page could carry, each with a string value, and a metric name."""
    return _METRIC_NAME.match(str(metric.get("__name__", ""))) is not None and all(
        isinstance(k, str) and isinstance(v, str) and (k == "__name__" or _LABEL_NAME.match(k))
        for k, v in metric.items()
    )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def head(metric: Mapping[str, str]) -> str:
    """`name{labels}` of a series as a page would write it, target labels dropped."""
    name = metric.get("__name__", "")
    labels = ",".join(
        f'{k}="{_escape(v)}"'
        for k, v in metric.items()
        if k != "__name__" and k not in promql.TARGET_LABELS
    )
    return f"{name}{{{labels}}}" if labels else name


Target = tuple[str, str]
"""(job, instance): one target of Prometheus."""


@dataclass(slots=True)
class Sample:
    """What one target's series say at one instant."""

    lines: list[str] = field(default_factory=list)
    vllm: bool = False
    time: float | None = None
    up: float | None = None
    duration: float | None = None


def _value(text: Any) -> float | None:
    """A finite number from a sample's value (Prometheus writes them as strings), or None."""
    v = _float(text)
    return v if v is not None and math.isfinite(v) else None


def _float(text: Any) -> float | None:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        return None
    try:
        return float(text)
    except (ValueError, OverflowError):
        return None


def _number(text: Any) -> str | None:
    """A sample's value as the page's text: the number it is, written by vtop, or None."""
    v = _float(text)
    if v is None:
        return None
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


_GPU, _TIME, _UP, _DURATION, _VLLM, _OTHER = range(6)


@dataclass(frozen=True, slots=True)
class Series:
    """What one result series is, worked out once (a backfill reuses it for every step)."""

    kind: int
    target: Target
    head: str = ""
    hosts: frozenset[str] = frozenset()


def classify(metric: Mapping[str, str]) -> Series | None:
    """What a series is; None for one no page could hold (`_well_formed`)."""
    if not _well_formed(metric):
        return None
    name = metric.get("__name__", "")
    target = (metric.get("job", ""), metric.get("instance", ""))
    if name.startswith("DCGM_"):
        hosts = {promql.host_of(target[1]), metric.get("Hostname", "")} - {""}
        return Series(_GPU, target, head(metric), frozenset(hosts))
    if name == promql.SCRAPE_TIME:
        return Series(_TIME, target)
    if name == "up":
        return Series(_UP, target)
    if name == "scrape_duration_seconds":
        return Series(_DURATION, target)
    return Series(_VLLM if name.startswith("vllm:") else _OTHER, target, head(metric))


Classify = Callable[[Mapping[str, str]], Series | None]

_UNKNOWN = object()


class Classifier:
    """`classify` that remembers: a fleet's series come back in every poll's answer and at
    every step of a backfill, and checking a series' labels and writing its page head cost
    several times the dict lookup. One per source; bounded as a `PageReader`'s routes are
    (`MAX_SERIES`, then forgotten at once), so a Prometheus that invents series forever costs
    time, not memory."""

    MAX_SERIES = 100_000
    """About 70 MB when full: the series of some 200 vLLM servers (a larger fleet is read
    uncached, at the cost of the time saved)."""

    def __init__(self) -> None:
        self._known: dict[tuple[tuple[str, str], ...], Series | None] = {}

    def __len__(self) -> int:
        return len(self._known)

    def __call__(self, metric: Mapping[str, str]) -> Series | None:
        try:
            key = tuple(metric.items())
            known = self._known.get(key, _UNKNOWN)
        except TypeError:  # a label value that is a list or a map: no page's, never kept
            return None
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        if len(self._known) >= self.MAX_SERIES:
            self._known.clear()
        series = self._known[key] = classify(metric)
        return series


class Sorter:
    """Sorts result series into per-target samples, dcgm-exporter series kept per target."""

    def __init__(self) -> None:
        self.targets: dict[Target, Sample] = {}
        self.gpu: dict[Target, list[str]] = {}
        self.gpu_hosts: dict[Target, frozenset[str]] = {}

    def add(self, series: Series, value: Any) -> None:
        kind, target = series.kind, series.target
        if kind in (_GPU, _VLLM, _OTHER):
            value = _number(value)
            if value is None:
                return
        if kind == _GPU:
            lines = self.gpu.get(target)
            if lines is None:
                lines = self.gpu[target] = []
                self.gpu_hosts[target] = series.hosts
            lines.append(f"{series.head} {value}")
            return
        sample = self.targets.get(target)
        if sample is None:
            sample = self.targets[target] = Sample()
        if kind == _VLLM:
            sample.lines.append(f"{series.head} {value}")
            sample.vllm = True
        elif kind == _OTHER:
            sample.lines.append(f"{series.head} {value}")
        elif kind == _TIME:
            sample.time = _value(value)
        elif kind == _UP:
            sample.up = _value(value)
        else:
            sample.duration = _value(value)

    def gpu_lines(self, target: Target) -> list[str]:
        """GPU series for a vLLM target: its own page's, else its node's dcgm-exporter's."""
        own = self.gpu.get(target)
        if own:
            return own
        host = promql.host_of(target[1])
        lines: list[str] = []
        for other, hosts in self.gpu_hosts.items():
            sample = self.targets.get(other)
            if host in hosts and (sample is None or not sample.vllm):
                lines.extend(self.gpu[other])
        return lines


def sort_vector(result: Iterable[Mapping[str, Any]], classify: Classify = classify) -> Sorter:
    """An instant query's vector, sorted into one sample per target (`classify`: a source's
    `Classifier`)."""
    sorter = Sorter()
    for item in result:
        value = item.get("value")
        metric = item.get("metric")
        if isinstance(metric, dict) and isinstance(value, list) and len(value) == 2:
            series = classify(metric)
            if series is not None:
                sorter.add(series, value[1])
    return sorter


def sort_matrix(
    result: Iterable[Mapping[str, Any]], classify: Classify = classify
) -> dict[float, Sorter]:
    """A range query's matrix, sorted per step (keyed by the step's time)."""
    steps: dict[float, Sorter] = {}
    for item in result:
        metric, values = item.get("metric"), item.get("values")
        if not isinstance(metric, dict) or not isinstance(values, list):
            continue
        series = classify(metric)
        if series is None:
            continue
        for point in values:
            if isinstance(point, list) and len(point) == 2:
                at = _value(point[0])
                if at is None:
                    continue
                sorter = steps.get(at)
                if sorter is None:
                    sorter = steps[at] = Sorter()
                sorter.add(series, point[1])
    return steps


# -- targets --------------------------------------------------------------------------------


def found_targets(result: Iterable[Mapping[str, Any]]) -> list[Target]:
    """The targets an instances query (`promql.instances_query`) found."""
    metrics = [item.get("metric") for item in result]
    return [
        (m.get("job", ""), m.get("instance", ""))
        for m in metrics
        if isinstance(m, dict)
        and isinstance(m.get("job", ""), str)
        and isinstance(m.get("instance", ""), str)
    ]


def target_names(targets: Iterable[Target]) -> dict[Target, str]:
    """What each target is called: its `instance`, with the job if that is ambiguous."""
    by_instance: dict[str, list[Target]] = {}
    for target in targets:
        by_instance.setdefault(target[1], []).append(target)
    names: dict[Target, str] = {}
    for group in by_instance.values():
        for target in group:
            job, instance = target
            name = instance if len(group) == 1 else f"{instance} ({job})"
            # Label values are the scraped targets' to choose: shown, they must be inert.
            names[target] = clean_label(name or f"{job} (no instance label)")
    return names


@dataclass(slots=True)
class Instance:
    """One target's reading state."""

    name: str
    target: Target
    reader: PageReader = field(default_factory=PageReader)
    last_t: float | None = None
    gap_s: float | None = None
    knobs: dict[str, Knob] = field(default_factory=dict)
    cache_info: dict[str, str] = field(default_factory=dict)
    counters: dict[SeriesKey, float] = field(default_factory=dict)
    error: str | None = None
    backfilled: bool = False
    live: bool = False

    def scrape(
        self,
        sample: Sample,
        gpu: Sequence[str],
        url: str,
        flags: Mapping[str, Knob],
        own_flags: Mapping[str, Knob],
        *,
        live: bool = True,
    ) -> Scrape | None:
        """A Scrape for the target's sample, if it is newer than the last one read.

        `url` is the Prometheus's (for the error lines); `flags` are every instance's knobs
        from the command line, `own_flags` this one's (a targets file's labels). Live polls
        between two scrapes of the target teach its scrape interval; backfill steps do not
        (they are the step), nor does the jump from the backfill to live."""
        t = sample.time
        if t is None or (self.last_t is not None and t <= self.last_t):
            return None
        if live and self.live and self.last_t is not None:
            self.gap_s = t - self.last_t
        self.live = self.live or live
        self.last_t = t
        instance = clean_label(self.target[1])  # the scraped target's to choose: inert
        if sample.up is not None and sample.up < 1:
            self.error = f"Prometheus at {url} reports {instance} down (up == 0)"
            return Scrape(self.name, t, latency_s=sample.duration, error=self.error)
        text = "\n".join([*sample.lines, *gpu])
        try:
            scrape = self.reader.read(text, endpoint=self.name, t=t, latency_s=sample.duration)
        except ParseError as exc:  # a label Prometheus passed that the page format cannot hold
            self.error = f"series of {instance} from Prometheus at {url}: {exc}"
            return Scrape(self.name, t, latency_s=sample.duration, error=self.error)
        scrape = replace(scrape, size_bytes=None)
        if not scrape.has_vllm_series:
            self.error = (
                f"Prometheus at {url} has no vllm: series of {instance} "
                "(is the server started with --disable-log-stats?)"
            )
            return replace(scrape, error=self.error, histograms={})
        self.error = None
        return self._with_knobs(scrape, flags, own_flags)

    def _with_knobs(
        self, scrape: Scrape, flags: Mapping[str, Knob], own_flags: Mapping[str, Knob]
    ) -> Scrape:
        """Attach the knobs on the first scrape, after a restart, and when the config changes."""
        counters = {k: v for k, v in scrape.scalars.items() if k.signal in _WATCHED}
        rediscover = not self.knobs or _restarted(self.counters, counters)
        self.counters = counters
        if scrape.info and scrape.info != self.cache_info:
            self.cache_info = dict(scrape.info)
            rediscover = True
        if not rediscover:
            return scrape
        models = tuple(sorted({k.model for k in scrape.scalars} - {"", ALL}))
        server = EndpointInfo(models=models)
        knobs = discovery.merge(
            cache_info=self.cache_info,
            endpoint=server,
            flags=flags,
            gpu_mem_bytes=_gpu_total(scrape),
        )
        knobs.update(own_flags)
        self.knobs = knobs
        return replace(scrape, knobs=dict(knobs), server=server)


_WATCHED = frozenset({"generation_tokens", "prompt_tokens", "api_start_time"})


def _restarted(old: Mapping[SeriesKey, float], new: Mapping[SeriesKey, float]) -> bool:
    for k, v in old.items():
        nv = new.get(k)
        if nv is not None and ((k.signal == "api_start_time" and nv != v) or nv < v):
            return True
    return False


def _gpu_total(scrape: Scrape) -> int | None:
    """The first GPU's memory from dcgm-exporter (used + free), for the version defaults."""
    used = {k.label: v for k, v in scrape.scalars.items() if k.signal == "gpu_mem_used"}
    free = {k.label: v for k, v in scrape.scalars.items() if k.signal == "gpu_mem_free"}
    both = sorted(set(used) & set(free))
    return int(used[both[0]] + free[both[0]]) if both else None
