"""Prometheus as a source: every vLLM instance a Prometheus scrapes, read through its HTTP API.

A fleet that runs Prometheus already scrapes every vLLM server; vtop reads from it instead of
scraping them again, and needs no network path to the servers themselves.

One Scrape per Prometheus scrape. Each poll is a single instant query (`promql.target_query`)
that returns, for every matching target, the latest sample of every catalog series, `up`,
`scrape_duration_seconds` and the scrape's own time (`timestamp(up)`). A target whose scrape
time has not moved since the last poll yields nothing; one that has yields a `Scrape` stamped
with Prometheus's scrape time, so the store sees the server's real sampling, not vtop's
polling. Polls come at most twice per scrape interval (learned from those times), so polling
at 1 Hz a Prometheus that scrapes every 15 s costs one query in seven or so.

The series of one target become the text of a page (`name{labels} value` lines, the target
labels `job` and `instance` dropped) and go through the same `PageReader` as a scraped page:
the catalog's routing (aliases across vLLM versions, `model_name` / `engine` keys, merging of
extra labels, dropping NaN) is applied once, in one place, so a Scrape from Prometheus is the
Scrape the server's own page would have given. dcgm-exporter series of the node an instance
runs on (same host in `instance`, or a `Hostname` label naming it) join that page, and the
catalog routes them to the `gpu_*` signals per GPU: remote GPUs without NVML.

History: the first poll backfills `backfill_s` (an hour by default) with one `query_range` per
instance at `step_s`, turned into Scrapes the same way and returned in one frame, oldest first,
so the first screen already has charts and the rules have stepped through that history (their
`for` and `keep_firing_for` included) before the first live scrape. An instance that appears
later is backfilled when it appears.

Errors are one line with the Prometheus URL (credentials and query values never shown):
Prometheus unreachable or refusing the query is retried with the live source's back-off, and
a target Prometheus reports down (`up == 0`) is a failed scrape of that endpoint, so its
history stays and the header says why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from vtop import durations
from vtop.model import ALL, EndpointInfo, Event, Frame, GpuStatus, Knob, Scrape, SeriesKey
from vtop.signals.extract import PageReader, clean_label
from vtop.signals.parser import ParseError
from vtop.sources import discovery, promql
from vtop.sources.live import BACKOFF_S
from vtop.sources.vllm import (
    ScrapeOptions,
    base_url,
    error_reason,
    redact_url,
    split_credentials,
)
from vtop.targets import check_url

DEFAULT_BACKFILL_S = 3600.0
MAX_POINTS = 240
"""Backfill steps per instance at most: an hour at 15 s (Prometheus's usual scrape interval),
a day at 6 min. Enough for the rules' windows, small enough to read in seconds."""
MIN_STEP_S = 15.0
QUERY_MAX_BYTES = 64 * 1024 * 1024
RANGE_MAX_BYTES = 256 * 1024 * 1024
RANGE_TIMEOUT_S = 60.0
BACKFILL_CONCURRENCY = 4
GPU_UNAVAILABLE = "read per endpoint from dcgm-exporter series in Prometheus, when present"

_HINTS = {
    401: "Prometheus wants credentials: set VTOP_API_KEY or pass --header 'Authorization: …'",
    403: "the credentials were refused: check VTOP_API_KEY or the --header values",
    404: "no query API there: is this Prometheus's base URL (http://host:9090)?",
}


class PrometheusError(Exception):
    """One line that says what went wrong with which Prometheus."""


class PrometheusClient:
    """The two HTTP API calls vtop makes: `query` and `query_range` (POSTed, JSON back)."""

    def __init__(self, url: str, options: ScrapeOptions | None = None) -> None:
        self.base, self._auth = split_credentials(base_url(url))
        self.url = redact_url(self.base)
        self.options = options or ScrapeOptions()
        self.timeout_s = max(5.0, self.options.timeout_s)
        proxy = self.options.proxy_for(self.base)  # the environment's; never for loopback
        self._client = httpx.AsyncClient(
            verify=self.options.tls(),
            proxy=httpx.Proxy(proxy) if proxy else None,
            follow_redirects=True,
            trust_env=False,  # trust and proxies are the options' (vtop/sources/netconfig.py)
        )
        headers = self.options.request_headers()
        headers["Accept"] = "application/json"
        self._headers = headers

    async def aclose(self) -> None:
        await self._client.aclose()

    def _api(self, path: str) -> str:
        """The API path under the base URL (a proxy's path prefix and query are kept)."""
        parts = urlsplit(self.base)
        return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path,
                           parts.query, ""))  # fmt: skip

    async def query(self, expr: str, t: float | None = None) -> list[dict[str, Any]]:
        """An instant query; the result vector (`metric`, `value` per element)."""
        form = {"query": expr}
        if t is not None:
            form["time"] = f"{t:.3f}"
        data = await self._call("/api/v1/query", form, self.timeout_s, QUERY_MAX_BYTES)
        return _result(data, "vector", self.url)

    async def query_range(
        self, expr: str, start: float, end: float, step_s: float
    ) -> list[dict[str, Any]]:
        """A range query; the result matrix (`metric`, `values` per series)."""
        form = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                "step": f"{step_s:g}"}  # fmt: skip
        data = await self._call("/api/v1/query_range", form, RANGE_TIMEOUT_S, RANGE_MAX_BYTES)
        return _result(data, "matrix", self.url)

    async def _call(
        self, path: str, form: Mapping[str, str], timeout: float, max_bytes: int
    ) -> Any:
        where = f"Prometheus at {self.url}"
        try:
            async with (
                asyncio.timeout(timeout),
                self._client.stream("POST", self._api(path), data=dict(form),
                                    headers=self._headers, timeout=timeout,
                                    auth=self._auth) as resp,
            ):  # fmt: skip
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        mib = max_bytes / 1048576
                        raise PrometheusError(f"{where}: answer to {path} larger than {mib:g} MiB")
                    chunks.append(chunk)
                status, kind = resp.status_code, resp.headers.get("content-type", "")
        except PrometheusError:
            raise
        except (httpx.TimeoutException, TimeoutError):
            raise PrometheusError(f"no answer from {where} within {timeout:g} s") from None
        except httpx.ConnectError as exc:
            raise PrometheusError(f"cannot connect to {where}: {error_reason(exc)}") from None
        except httpx.HTTPError as exc:
            raise PrometheusError(f"request to {where} failed: {error_reason(exc)}") from None
        body = b"".join(chunks)
        try:
            data = json.loads(body)
        except ValueError:
            hint = _HINTS.get(status, "")
            msg = f"{where}: {path} answered HTTP {status} ({kind or 'no type'}), not JSON"
            raise PrometheusError(f"{msg}: {hint}" if hint else msg) from None
        if not isinstance(data, dict):
            raise PrometheusError(f"{where}: {path} answered JSON that is not an API response")
        if data.get("status") != "success":
            kind = str(data.get("errorType") or f"HTTP {status}")
            err = " ".join(str(data.get("error") or _HINTS.get(status, "error")).split())
            raise PrometheusError(f"{where} refused the query: {kind}: {err[:300]}")
        return data.get("data")


def _result(data: Any, kind: str, url: str) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("resultType") != kind:
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusError(f"Prometheus at {url}: expected a {kind} result, got {got}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"Prometheus at {url}: the {kind} result is not a list")
    return [item for item in result if isinstance(item, dict)]


# -- pages from series --------------------------------------------------------------------------


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def head(metric: Mapping[str, str]) -> str:
    """`name{labels}` of a series as a page would write it, target labels dropped."""
    name = metric.get("__name__", "")
    labels = ",".join(f'{k}="{_escape(v)}"' for k, v in metric.items()
                      if k != "__name__" and k not in promql.TARGET_LABELS)  # fmt: skip
    return f"{name}{{{labels}}}" if labels else name


Target = tuple[str, str]
"""(job, instance): one target of Prometheus."""


@dataclass(slots=True)
class _Sample:
    """What one target's series say at one instant."""

    lines: list[str] = field(default_factory=list)
    vllm: bool = False
    time: float | None = None
    up: float | None = None
    duration: float | None = None


@dataclass(slots=True)
class _Instance:
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


def _value(text: Any) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


_GPU, _TIME, _UP, _DURATION, _VLLM, _OTHER = range(6)


@dataclass(frozen=True, slots=True)
class _Series:
    """What one result series is, worked out once (a backfill reuses it for every step)."""

    kind: int
    target: Target
    head: str = ""
    hosts: frozenset[str] = frozenset()


def classify(metric: Mapping[str, str]) -> _Series:
    name = metric.get("__name__", "")
    target = (metric.get("job", ""), metric.get("instance", ""))
    if name.startswith("DCGM_"):
        hosts = {promql.host_of(target[1]), metric.get("Hostname", "")} - {""}
        return _Series(_GPU, target, head(metric), frozenset(hosts))
    if name == promql.SCRAPE_TIME:
        return _Series(_TIME, target)
    if name == "up":
        return _Series(_UP, target)
    if name == "scrape_duration_seconds":
        return _Series(_DURATION, target)
    return _Series(_VLLM if name.startswith("vllm:") else _OTHER, target, head(metric))


class _Sorter:
    """Sorts result series into per-target samples, dcgm-exporter series kept per target."""

    def __init__(self) -> None:
        self.targets: dict[Target, _Sample] = {}
        self.gpu: dict[Target, list[str]] = {}
        self.gpu_hosts: dict[Target, frozenset[str]] = {}

    def add(self, series: _Series, value: Any) -> None:
        kind, target = series.kind, series.target
        if kind == _GPU:
            lines = self.gpu.get(target)
            if lines is None:
                lines = self.gpu[target] = []
                self.gpu_hosts[target] = series.hosts
            lines.append(f"{series.head} {value}")
            return
        sample = self.targets.get(target)
        if sample is None:
            sample = self.targets[target] = _Sample()
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


# -- the source -------------------------------------------------------------------------------


class PrometheusSource:
    """Every vLLM instance a Prometheus scrapes, as a `FrameSource`."""

    def __init__(
        self,
        url: str,
        options: ScrapeOptions | None = None,
        *,
        match: Sequence[str] = (),
        backfill_s: float = DEFAULT_BACKFILL_S,
        step_s: float | None = None,
        interval_s: float = 1.0,
        flags: Mapping[str, Knob] | None = None,
        instance_flags: Mapping[str, Mapping[str, Knob]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = PrometheusClient(url, options)
        self.url = self.client.url
        self.match = tuple(match)
        self.backfill_s = max(0.0, backfill_s)
        self.step_s = step_s if step_s is not None else backfill_step(self.backfill_s)
        self.interval_s = interval_s
        self._flags = dict(flags or {})
        self._instance_flags = {k: dict(v) for k, v in (instance_flags or {}).items()}
        self._clock = clock
        self.instances: dict[Target, _Instance] = {}
        self._started = False
        self._attempt = 0
        self._next_try = 0.0
        self._last_query: float | None = None
        self._skew = 0.0
        """Prometheus's clock minus ours, from the newest scrape time (late by < 1 interval)."""
        self.error: str | None = None
        """Why the last query failed (Prometheus itself), None while it answers."""
        self.queries = 0

    # -- FrameSource ---------------------------------------------------------------------------

    @property
    def endpoints(self) -> list[str]:
        return [inst.name for inst in self.instances.values()]

    def status(self, endpoint: str) -> str:
        """As `LiveSource` says it (the screens read these words): `connected`,
        `connecting`, `reconnecting (attempt k, next in N s)` while Prometheus does not answer,
        or why the target itself is not (`Prometheus at … reports … down (up == 0)`)."""
        inst = next((i for i in self.instances.values() if i.name == endpoint), None)
        if self.error is not None and self._attempt:
            wait = max(0.0, self._next_try - self._clock())
            return f"reconnecting (attempt {self._attempt}, next in {wait:.0f} s)"
        if inst is None:
            return self.error or "connecting"
        if inst.error is not None:
            return inst.error
        return "connected" if inst.last_t is not None else "connecting"

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> PrometheusSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def poll(self) -> Frame:
        """The first poll backfills history; later ones return the scrapes that are new.

        The history comes in this one frame, oldest scrape first: any consumer gets the charts
        and the rules' state over the past. A consumer that wants each backfill step as a frame
        of its own (a report's timeline of findings) calls `history()` first instead."""
        now = self._clock()
        if self.error is not None and now < self._next_try:
            return Frame(t=now, scrapes=(), gpu=GpuStatus(unavailable=GPU_UNAVAILABLE))
        if self._started and not self._due(now):
            return Frame(t=now, scrapes=(), gpu=GpuStatus(unavailable=GPU_UNAVAILABLE))
        frames = await self._frames(now, first=not self._started)
        if len(frames) == 1:
            return frames[0]
        scrapes = sorted((s for f in frames for s in f.scrapes), key=lambda s: s.t)
        return Frame(t=max(f.t for f in frames), scrapes=tuple(scrapes),
                     gpu=GpuStatus(unavailable=GPU_UNAVAILABLE),
                     events=tuple(e for f in frames for e in f.events))  # fmt: skip

    async def history(self) -> list[Frame]:
        """Before the first poll: the backfill as one frame per step (oldest first), then the
        latest scrapes. Empty once started; a failure is one frame of failed scrapes."""
        if self._started:
            return []
        return await self._frames(self._clock(), first=True)

    async def _frames(self, now: float, *, first: bool) -> list[Frame]:
        try:
            frames = await self._history(now) if first else [await self._poll(now)]
            self._started = True
        except PrometheusError as exc:
            self.error = str(exc)
            delay = BACKOFF_S[min(self._attempt, len(BACKOFF_S) - 1)]
            self._attempt += 1
            self._next_try = self._clock() + delay
            return [self._failed(now + self._skew, self.error)]
        if self.error is not None:
            back = Event(now, "reconnect", self.url, "Prometheus answers again")
            frames[0] = replace(frames[0], events=(back, *frames[0].events))
        self.error, self._attempt = None, 0
        return frames

    # -- polling ---------------------------------------------------------------------------------

    def _due(self, now: float) -> bool:
        """True when some target has probably been scraped again since the last query."""
        if self._last_query is None:
            return True
        gaps = [i.gap_s for i in self.instances.values() if i.gap_s]
        least = min(gaps) if gaps else self.interval_s
        return now - self._last_query >= max(self.interval_s, least / 2) - 0.1 * self.interval_s

    def _failed(self, t: float, error: str) -> Frame:
        """A failed query: one failed scrape per known target (or one for Prometheus itself).

        Stamped on Prometheus's clock (local time plus the skew last seen), so the scrapes
        that follow recovery are not older than the failure."""
        known = list(self.instances.values())
        if not known:
            return Frame(t=t, scrapes=(Scrape(self.url, t, error=error),),
                         gpu=GpuStatus(unavailable=GPU_UNAVAILABLE))  # fmt: skip
        scrapes = tuple(Scrape(i.name, max(t, (i.last_t or 0.0) + 1e-3), error=error)
                        for i in known)  # fmt: skip
        events = tuple(Event(t, "disconnect", i.name, error) for i in known)
        return Frame(t=t, scrapes=scrapes, gpu=GpuStatus(unavailable=GPU_UNAVAILABLE),
                     events=events)  # fmt: skip

    def _hosts(self) -> list[str]:
        return sorted({promql.host_of(t[1]) for t in self.instances})

    async def _query_latest(self) -> _Sorter:
        self.queries += 1
        self._last_query = self._clock()
        result = await self.client.query(promql.target_query(self.match, self._hosts()))
        sorter = _Sorter()
        for item in result:
            value = item.get("value")
            metric = item.get("metric")
            if isinstance(metric, dict) and isinstance(value, list) and len(value) == 2:
                sorter.add(classify(metric), value[1])
        return sorter

    async def _poll(self, now: float) -> Frame:
        sorter = await self._query_latest()
        new = [t for t, s in sorter.targets.items() if s.vllm and t not in self.instances]
        scrapes: list[Scrape] = []
        events: list[Event] = []
        if new:
            self._adopt(new)
            # A target that appeared since the start gets its history too, and then the hosts
            # of its node are in the query (its GPUs), so read once more.
            for target in new:
                got, evs = await self._backfill(self.instances[target], now)
                scrapes.extend(scrape for _, scrape in got)
                events.extend(evs)
            sorter = await self._query_latest()
        for target, inst in self.instances.items():
            sample = sorter.targets.get(target)
            if sample is not None:
                scrape = self._scrape(inst, sample, sorter.gpu_lines(target))
                if scrape is not None:
                    scrapes.append(scrape)
        scrapes.sort(key=lambda s: s.t)
        newest = max((s.time for s in sorter.targets.values() if s.time is not None),
                     default=None)  # fmt: skip
        if newest is not None:
            self._skew = newest - now
        t = max((s.t for s in scrapes), default=now + self._skew)
        return Frame(t=t, scrapes=tuple(scrapes), gpu=GpuStatus(unavailable=GPU_UNAVAILABLE),
                     events=tuple(events))  # fmt: skip

    def _adopt(self, targets: Iterable[Target]) -> None:
        """Start reading new targets; names are their `instance`, with the job if ambiguous."""
        for target in sorted(targets):
            self.instances[target] = _Instance(target[1], target)
        by_instance: dict[str, list[Target]] = {}
        for target in self.instances:
            by_instance.setdefault(target[1], []).append(target)
        for group in by_instance.values():
            for target in group:
                job, instance = target
                name = instance if len(group) == 1 else f"{instance} ({job})"
                # Label values are the scraped targets' to choose: shown, they must be inert.
                self.instances[target].name = clean_label(name or f"{job} (no instance label)")

    def _scrape(
        self, inst: _Instance, sample: _Sample, gpu: Sequence[str], *, live: bool = True
    ) -> Scrape | None:
        """A Scrape for the target's sample, if it is newer than the last one read.

        Live polls between two scrapes of the target teach its scrape interval; backfill
        steps do not (they are the step), nor does the jump from the backfill to live."""
        t = sample.time
        if t is None or (inst.last_t is not None and t <= inst.last_t):
            return None
        if live and inst.live and inst.last_t is not None:
            inst.gap_s = t - inst.last_t
        inst.live = inst.live or live
        inst.last_t = t
        if sample.up is not None and sample.up < 1:
            inst.error = f"Prometheus at {self.url} reports {inst.target[1]} down (up == 0)"
            return Scrape(inst.name, t, latency_s=sample.duration, error=inst.error)
        text = "\n".join([*sample.lines, *gpu])
        try:
            scrape = inst.reader.read(text, endpoint=inst.name, t=t, latency_s=sample.duration)
        except ParseError as exc:  # a label Prometheus passed that the page format cannot hold
            inst.error = f"series of {inst.target[1]} from Prometheus at {self.url}: {exc}"
            return Scrape(inst.name, t, latency_s=sample.duration, error=inst.error)
        scrape = replace(scrape, size_bytes=None)
        if not scrape.has_vllm_series:
            inst.error = (f"Prometheus at {self.url} has no vllm: series of {inst.target[1]} "
                          "(is the server started with --disable-log-stats?)")  # fmt: skip
            return replace(scrape, error=inst.error, histograms={})
        inst.error = None
        return self._with_knobs(inst, scrape)

    def _with_knobs(self, inst: _Instance, scrape: Scrape) -> Scrape:
        """Attach the knobs on the first scrape, after a restart, and when the config changes."""
        counters = {k: v for k, v in scrape.scalars.items() if k.signal in _WATCHED}
        rediscover = not inst.knobs or _restarted(inst.counters, counters)
        inst.counters = counters
        if scrape.info and scrape.info != inst.cache_info:
            inst.cache_info = dict(scrape.info)
            rediscover = True
        if not rediscover:
            return scrape
        models = tuple(sorted({k.model for k in scrape.scalars} - {"", ALL}))
        server = EndpointInfo(models=models)
        knobs = discovery.merge(cache_info=inst.cache_info, endpoint=server, flags=self._flags,
                                gpu_mem_bytes=_gpu_total(scrape))  # fmt: skip
        knobs.update(self._instance_flags.get(inst.target[1], {}))
        inst.knobs = knobs
        return replace(scrape, knobs=dict(knobs), server=server)

    # -- start and backfill ----------------------------------------------------------------------

    async def _history(self, now: float) -> list[Frame]:
        """Find the instances, backfill each (one frame per step), then read the latest."""
        window = max(self.backfill_s, 5 * 60.0)
        result = await self.client.query(promql.instances_query(self.match, window), now)
        metrics = [item.get("metric") for item in result]
        found = [(str(m.get("job", "")), str(m.get("instance", "")))
                 for m in metrics if isinstance(m, dict)]  # fmt: skip
        if not found:
            sel = "{" + ",".join(self.match) + "}"
            raise PrometheusError(
                f"Prometheus at {self.url} has no vllm:num_requests_running series matching "
                f"{sel} in the last {window / 60:g} min"
            )
        self._adopt(found)
        steps: dict[float, list[Scrape]] = {}
        events: list[Event] = []
        if self.backfill_s > 0:
            sem = asyncio.Semaphore(BACKFILL_CONCURRENCY)

            async def one(inst: _Instance) -> tuple[list[tuple[float, Scrape]], list[Event]]:
                async with sem:
                    return await self._backfill(inst, now)

            for got, evs in await asyncio.gather(*(one(i) for i in self.instances.values())):
                for at, scrape in got:
                    steps.setdefault(at, []).append(scrape)
                events.extend(evs)
        frames = [
            Frame(t=max(s.t for s in group), scrapes=tuple(sorted(group, key=lambda s: s.t)),
                  gpu=GpuStatus(unavailable=GPU_UNAVAILABLE))
            for _, group in sorted(steps.items())
        ]  # fmt: skip
        if frames:
            frames[0] = replace(frames[0], events=tuple(events))
        frames.append(await self._poll(now))
        return frames

    async def _backfill(
        self, inst: _Instance, now: float
    ) -> tuple[list[tuple[float, Scrape]], list[Event]]:
        """The target's history as (step, Scrape), one per step at which it was scraped anew."""
        if inst.backfilled or self.backfill_s <= 0:
            return [], []
        inst.backfilled = True
        job, instance = inst.target
        matchers = [*self.match, f"job={promql.quote(job)}", f"instance={promql.quote(instance)}"]
        expr = promql.target_query(matchers, [promql.host_of(instance)])
        start = now - self.backfill_s
        step = self.step_s
        start = math.floor(start / step) * step
        self.queries += 1
        result = await self.client.query_range(expr, start, now, step)
        steps: dict[float, _Sorter] = {}
        for item in result:
            metric, values = item.get("metric"), item.get("values")
            if not isinstance(metric, dict) or not isinstance(values, list):
                continue
            series = classify(metric)
            for point in values:
                if isinstance(point, list) and len(point) == 2:
                    sorter = steps.get(point[0])
                    if sorter is None:
                        sorter = steps[point[0]] = _Sorter()
                    sorter.add(series, point[1])
        scrapes: list[tuple[float, Scrape]] = []
        for at in sorted(steps, key=float):
            sorter = steps[at]
            sample = sorter.targets.get(inst.target)
            if sample is not None:
                scrape = self._scrape(inst, sample, sorter.gpu_lines(inst.target), live=False)
                if scrape is not None:
                    scrapes.append((float(at), scrape))
        events = []
        if scrapes:
            first, minutes = scrapes[0][1].t, (scrapes[-1][1].t - scrapes[0][1].t) / 60
            said = (f"history from Prometheus at {self.url}: {len(scrapes)} scrapes over "
                    f"{minutes:.0f} min (step {step:g} s)")  # fmt: skip
            events.append(Event(first, "note", inst.name, said))
        return scrapes, events


def backfill_step(backfill_s: float) -> float:
    """The step of the backfill: at most `MAX_POINTS` per series, never finer than 10 s."""
    if backfill_s <= 0:
        return MIN_STEP_S
    return max(MIN_STEP_S, math.ceil(backfill_s / MAX_POINTS))


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


# -- the command line -------------------------------------------------------------------------


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """`--prometheus URL`, `--match SELECTOR` and `--backfill DURATION`."""
    group.add_argument(
        "--prometheus",
        metavar="URL",
        help="read every vLLM instance from this Prometheus (its HTTP API) instead of "
        "scraping them; --header and VTOP_API_KEY apply to it",
    )
    group.add_argument(
        "--match",
        metavar="SELECTOR",
        default="",
        help="with --prometheus: label matchers that choose the instances, e.g. "
        '\'{job="vllm",env="prod"}\'',
    )
    group.add_argument(
        "--backfill",
        metavar="DURATION",
        default="1h",
        help="with --prometheus: history to read on start (default 1h; 0 for none)",
    )


def from_args(
    args: argparse.Namespace,
    options: ScrapeOptions,
    *,
    flags: Mapping[str, Knob] | None = None,
    instance_flags: Mapping[str, Mapping[str, Knob]] | None = None,
) -> PrometheusSource:
    """The source `--prometheus` asks for; ValueError (one line) for a bad --match/--backfill."""
    problem = check_url(args.prometheus)
    if problem:
        raise ValueError(f"--prometheus: {problem}")
    try:
        match = promql.parse_match(args.match)
    except promql.MatchError as exc:
        raise ValueError(str(exc)) from None
    try:
        backfill = durations.parse(args.backfill)
    except ValueError as exc:
        raise ValueError(f"--backfill: {exc}") from None
    return PrometheusSource(args.prometheus, options, match=match, backfill_s=backfill,
                            interval_s=args.interval, flags=flags,
                            instance_flags=instance_flags)  # fmt: skip
