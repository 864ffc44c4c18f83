"""Prometheus as a source: every vLLM instance a Prometheus scrapes, read through its HTTP API.

A fleet that runs Prometheus already scrapes every vLLM server; vtop reads from it instead of
scraping them again, and needs no network path to the servers themselves.

One Scrape per Prometheus scrape. Each poll is a single instant query (`promql.target_query`)
that returns, for every matching target, the latest sample of every catalog series, `up`,
`scrape_duration_seconds` and the scrape's own time (`timestamp(up)`). A target whose scrape
time has not moved since the last poll yields nothing; one that has yields a `Scrape` stamped
with Prometheus's scrape time, so the store sees the server's real sampling, not vtop's
polling. Polls come at most twice per scrape interval (learned from those times), so polling
at 1 Hz a Prometheus that scrapes every 15 s costs one query in seven or so. How a result
becomes Scrapes is `series.py`'s; the requests are `client.py`'s; this module decides when to
ask, and turns the answers into frames.

History: the first poll backfills `backfill_s` (an hour by default) with one `query_range` per
instance at `step_s`, turned into Scrapes the same way and returned in one frame, oldest first,
so the first screen already has charts and the rules have stepped through that history (their
`for` and `keep_firing_for` included) before the first live scrape. An instance that appears
later is backfilled when it appears. A backfill whose answer cannot be used (larger than the
client's cap, not JSON) is a note on that instance, and its live reading goes on.

Errors are one line with the Prometheus URL (credentials and query values never shown):
Prometheus unreachable or refusing the query is retried with the live source's back-off, and
a target Prometheus reports down (`up == 0`) is a failed scrape of that endpoint, so its
history stays and the header says why.

The source takes plain values (a URL, `ScrapeOptions`, matchers, durations in seconds); the
flags that ask for it are vtop/cli/prometheus_args.py's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from vtop.model import Event, Frame, GpuStatus, Knob, Scrape
from vtop.sources import promql
from vtop.sources.live import BACKOFF_S
from vtop.sources.prometheus.client import AnswerError, PrometheusClient, PrometheusError
from vtop.sources.prometheus.series import (
    Classifier,
    Instance,
    Sample,
    Sorter,
    Target,
    found_targets,
    sort_matrix,
    sort_vector,
    target_names,
)
from vtop.sources.status import CONNECTED, CONNECTING, ConnectionStatus
from vtop.sources.vllm import ScrapeOptions

DEFAULT_BACKFILL_S = 3600.0
MAX_POINTS = 240
"""Backfill steps per instance at most: an hour at 15 s (Prometheus's usual scrape interval),
a day at 6 min. Enough for the rules' windows, small enough to read in seconds."""
MIN_STEP_S = 15.0
BACKFILL_CONCURRENCY = 4
GPU_UNAVAILABLE = "read per endpoint from dcgm-exporter series in Prometheus, when present"


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
        self.instances: dict[Target, Instance] = {}
        self._classify = Classifier()
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

    def watching(self) -> list[str]:
        """The query, as a report and a recording name it (`vtop.sources.base.watching`)."""
        match = "{" + ",".join(self.match) + "}" if self.match else ""
        return [f"Prometheus {self.url}{match}"]

    def status(self, endpoint: str) -> ConnectionStatus:
        """As `LiveSource` says it: connected, connecting, reconnecting while Prometheus does
        not answer, or down with why the target itself is not (`Prometheus at … reports …
        down (up == 0)`)."""
        inst = next((i for i in self.instances.values() if i.name == endpoint), None)
        if self.error is not None and self._attempt:
            wait = max(0.0, self._next_try - self._clock())
            return ConnectionStatus("reconnecting", self._attempt, wait)
        if inst is None:
            return ConnectionStatus("down", detail=self.error) if self.error else CONNECTING
        if inst.error is not None:
            return ConnectionStatus("down", detail=inst.error)
        return CONNECTED if inst.last_t is not None else CONNECTING

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
        return Frame(
            t=max(f.t for f in frames),
            scrapes=tuple(scrapes),
            gpu=GpuStatus(unavailable=GPU_UNAVAILABLE),
            events=tuple(e for f in frames for e in f.events),
        )

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
            return Frame(
                t=t,
                scrapes=(Scrape(self.url, t, error=error),),
                gpu=GpuStatus(unavailable=GPU_UNAVAILABLE),
            )
        scrapes = tuple(
            Scrape(i.name, max(t, (i.last_t or 0.0) + 1e-3), error=error) for i in known
        )
        events = tuple(Event(t, "disconnect", i.name, error) for i in known)
        return Frame(
            t=t, scrapes=scrapes, gpu=GpuStatus(unavailable=GPU_UNAVAILABLE), events=events
        )

    def _hosts(self) -> list[str]:
        return sorted({promql.host_of(t[1]) for t in self.instances})

    async def _query_latest(self) -> Sorter:
        self.queries += 1
        self._last_query = self._clock()
        expr = promql.target_query(self.match, self._hosts())
        return sort_vector(await self.client.query(expr), self._classify)

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
        newest = max((s.time for s in sorter.targets.values() if s.time is not None), default=None)
        if newest is not None:
            self._skew = newest - now
        t = max((s.t for s in scrapes), default=now + self._skew)
        return Frame(
            t=t,
            scrapes=tuple(scrapes),
            gpu=GpuStatus(unavailable=GPU_UNAVAILABLE),
            events=tuple(events),
        )

    def _adopt(self, targets: Iterable[Target]) -> None:
        """Start reading new targets; names are their `instance`, with the job if ambiguous."""
        for target in sorted(targets):
            self.instances[target] = Instance(target[1], target)
        for target, name in target_names(self.instances).items():
            self.instances[target].name = name

    def _scrape(
        self, inst: Instance, sample: Sample, gpu: Sequence[str], *, live: bool = True
    ) -> Scrape | None:
        """A Scrape for the target's sample, if it is newer than the last one read."""
        own = self._instance_flags.get(inst.target[1], {})
        return inst.scrape(sample, gpu, self.url, self._flags, own, live=live)

    # -- start and backfill ----------------------------------------------------------------------

    async def _history(self, now: float) -> list[Frame]:
        """Find the instances, backfill each (one frame per step), then read the latest."""
        window = max(self.backfill_s, 5 * 60.0)
        result = await self.client.query(promql.instances_query(self.match, window), now)
        found = found_targets(result)
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

            async def one(inst: Instance) -> tuple[list[tuple[float, Scrape]], list[Event]]:
                async with sem:
                    return await self._backfill(inst, now)

            for got, evs in await asyncio.gather(*(one(i) for i in self.instances.values())):
                for at, scrape in got:
                    steps.setdefault(at, []).append(scrape)
                events.extend(evs)
        frames = [
            Frame(
                t=max(s.t for s in group),
                scrapes=tuple(sorted(group, key=lambda s: s.t)),
                gpu=GpuStatus(unavailable=GPU_UNAVAILABLE),
            )
            for _, group in sorted(steps.items())
        ]
        latest = await self._poll(now)
        if frames:
            frames[0] = replace(frames[0], events=tuple(events))
        elif events:  # no history at all (a backfill refused): its notes come with the latest
            latest = replace(latest, events=(*events, *latest.events))
        frames.append(latest)
        return frames

    async def _backfill(
        self, inst: Instance, now: float
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
        try:
            answer = await self.client.query_range(expr, start, now, step)
            steps = sort_matrix(answer, self._classify)
        except AnswerError as exc:  # this history cannot be read; the live reading can
            said = f"no history for {inst.name}: {exc} (a shorter --backfill asks for less)"
            return [], [Event(now, "note", inst.name, said)]
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
            said = (
                f"history from Prometheus at {self.url}: {len(scrapes)} scrapes over "
                f"{minutes:.0f} min (step {step:g} s)"
            )
            events.append(Event(first, "note", inst.name, said))
        return scrapes, events


def backfill_step(backfill_s: float) -> float:
    """The step of the backfill: at most `MAX_POINTS` per series, never finer than 10 s."""
    if backfill_s <= 0:
        return MIN_STEP_S
    return max(MIN_STEP_S, math.ceil(backfill_s / MAX_POINTS))
