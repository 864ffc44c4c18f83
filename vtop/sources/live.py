"""Live polling of one or more vLLM endpoints, producing one `Frame` per poll.

The live source is the only place that knows about wall time, sockets and back-off; the
`Frame`s it returns are the same values a recorded trace or the simulator yields, so what
follows (store, rules, screens, report, recorder) never knows which it is reading.

An endpoint that fails is retried with capped exponential back-off (1, 2, 4 … 30 s) instead of
being hammered every poll; meanwhile its scrape carries the reason and when the next attempt
is due, and the history collected so far stays. An endpoint that refuses the connection
(stopped, or restarting: nothing listens on the port) is the exception: a refused connection
costs the server nothing, so it is tried every `REFUSED_RETRY_S`, and a restarted server is
read within a second of listening again instead of up to 30 s later. A server that answers
badly (errors, timeouts) is one that is up and may be struggling: that one backs off.

When an endpoint (re)connects or restarts (`vtop.signals.resets`: the rule the store's restart
events follow too), vtop re-reads what the server says about itself and its configuration: a
restart is usually the user applying a recommendation, and the new values must be the ones
the next advice starts from. Between those, the endpoint's recent (running, waiting, KV) polls
may reveal max_num_seqs when nothing stated it (`inferred`); the frame that changes a knob
carries the new knobs.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from vtop.model import (
    EndpointInfo,
    Event,
    Frame,
    GpuStatus,
    HostReading,
    Knob,
    Scrape,
    SeriesKey,
)
from vtop.signals import resets
from vtop.sources import cpu, discovery
from vtop.sources.status import CONNECTED, CONNECTING, ConnectionStatus
from vtop.sources.urls import base_url, host_of, redact_url
from vtop.sources.vllm import ScrapeOptions, VllmScraper

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
REFUSED_RETRY_S = 1.0
"""The retry pace of an endpoint whose connection was refused: a cheap probe, at once a read."""
BEHAVIOUR_POLLS = 60

ProcessProbe = Callable[[int], Mapping[str, Knob] | None]
"""Given a local port, the knobs of the vLLM process serving it (None if none is found)."""


def is_local(url: str) -> bool:
    """True when the URL names this host, so its GPUs and processes are the server's.

    A simulated server (`sim://…`) counts as local: its GPU readings are its own.
    """
    if url.startswith("sim://"):
        return True
    host = host_of(url)  # "" for a name that is no URL (a Prometheus `instance` label)
    if host in ("localhost", socket.gethostname()):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_unspecified


def url_port(url: str) -> int:
    parts = urlsplit(url if "://" in url else "http://" + url)
    return parts.port or (443 if parts.scheme == "https" else 80)


@dataclass(slots=True)
class EndpointState:
    """What the live source knows about one endpoint's connection."""

    scraper: VllmScraper
    local: bool
    connected: bool = False
    attempt: int = 0
    next_try: float = 0.0
    last_error: str | None = None
    knobs: dict[str, Knob] = field(default_factory=dict)
    server: EndpointInfo = field(default_factory=EndpointInfo)
    cache_info: dict[str, str] = field(default_factory=dict)
    last_counters: dict[SeriesKey, float] = field(default_factory=dict)
    behaviour: deque[tuple[float | None, float | None, float | None]] = field(
        default_factory=lambda: deque(maxlen=BEHAVIOUR_POLLS)
    )
    """(running, waiting, KV usage) of the latest polls, to read max_num_seqs from behaviour
    when nothing states it (see discovery.with_inferred_max_num_seqs)."""

    def status(self, now: float) -> ConnectionStatus:
        """Connected, connecting, or reconnecting with the attempt and the delay."""
        if self.connected:
            return CONNECTED
        if self.attempt == 0:
            return CONNECTING
        return ConnectionStatus("reconnecting", self.attempt, max(0.0, self.next_try - now))


class LiveSource:
    """Polls endpoints; `await poll()` once per interval returns the next `Frame`."""

    real_time = True
    """Each poll reads the servers as they are now (`vtop.sources.base.real_time`)."""

    def __init__(
        self,
        urls: Sequence[str],
        options: ScrapeOptions | None = None,
        *,
        flags: Mapping[str, Knob] | None = None,
        endpoint_flags: Mapping[str, Mapping[str, Knob]] | None = None,
        gpu: Callable[[], GpuStatus] | None = None,
        host: Callable[[], HostReading] | None = None,
        process_probe: ProcessProbe | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("no endpoint to poll")
        self.options = options or ScrapeOptions()
        self.endpoints: dict[str, EndpointState] = {}
        for url in urls:
            scraper = VllmScraper(url, self.options)
            self.endpoints[scraper.url] = EndpointState(scraper, is_local(scraper.base))
        self._flags = dict(flags or {})
        self._endpoint_flags = {
            redact_url(base_url(url)): dict(knobs) for url, knobs in (endpoint_flags or {}).items()
        }
        """Per-endpoint knobs (a targets file's labels): what the user said of this one server
        wins over what vtop read or assumed."""
        self._gpu = gpu
        self._host = host
        self._sampling_host = True
        self._probe = process_probe
        self._clock = clock
        self._last_gpu = GpuStatus(unavailable="no GPU reader")

    def watching(self) -> list[str]:
        """The endpoints' URLs, without secrets (`vtop.sources.base.watching`)."""
        return list(self.endpoints)

    def set_interval(self, interval_s: float) -> None:
        """The poll interval changed (the TUI's +/-): requests get its timeout (`timeout_for`)."""
        self.options = self.options.for_interval(interval_s)
        for state in self.endpoints.values():
            state.scraper.set_interval(interval_s)

    def pace(self, seconds: float) -> None:
        """A warm-up poll comes sooner (`vtop.sources.pacing`); request timeouts stay those of
        the interval, so an answer that comes late delays the next poll instead of failing."""

    def sample_host(self, on: bool) -> None:
        """Read the host with every frame, or not (see `vtop.sources.base`). Turned on, the
        host is read once at once, so the next frame's CPU shares cover the time from now."""
        if on and not self._sampling_host and self._host is not None:
            self._host()
        self._sampling_host = on

    async def aclose(self) -> None:
        for state in self.endpoints.values():
            await state.scraper.aclose()

    async def __aenter__(self) -> LiveSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def poll(self) -> Frame:
        """Poll every endpoint that is due (concurrently), the GPUs and the host."""
        gpu_task = None
        if self._gpu is not None:
            if self._last_gpu.gpus:
                gpu_task = asyncio.create_task(asyncio.to_thread(self._gpu))
            else:  # no GPU readable: the reader answers from its cache, a thread costs more
                self._last_gpu = self._gpu()
        states = list(self.endpoints.values())
        if len(states) == 1:  # one endpoint: no task and gathering future to make every poll
            results = [await self._poll_one(states[0])]
        else:
            results = await asyncio.gather(*(self._poll_one(s) for s in states))
        scrapes = tuple(scrape for scrape, _ in results)
        events = tuple(e for _, evs in results for e in evs)
        if gpu_task is not None:
            self._last_gpu = await gpu_task
        host = self._host() if self._host and self._sampling_host else None
        t = max((s.t for s in scrapes), default=time.time())
        return Frame(t=t, scrapes=scrapes, gpu=self._last_gpu, host=host, events=events)

    async def _poll_one(self, state: EndpointState) -> tuple[Scrape, list[Event]]:
        now = self._clock()
        url = state.scraper.url
        if not state.connected and now < state.next_try:
            return Scrape(url, time.time(), error=state.last_error or "not connected"), []
        scrape = await state.scraper.scrape()
        events: list[Event] = []
        if not scrape.ok:
            if state.connected:
                events.append(Event(scrape.t, "disconnect", url, scrape.error or "lost"))
            state.connected = False
            delay = BACKOFF_S[min(state.attempt, len(BACKOFF_S) - 1)]
            if state.scraper.refused:  # nothing listens: trying again costs nothing
                delay = min(delay, REFUSED_RETRY_S)
            state.attempt += 1
            state.next_try = self._clock() + delay
            state.last_error = scrape.error
            return scrape, events
        rediscover = not state.connected or resets.restarted(
            scrape.scalars, state.last_counters.get
        )
        if not state.connected and state.attempt > 0:
            events.append(Event(scrape.t, "reconnect", url, "connection restored"))
        state.connected, state.attempt, state.last_error = True, 0, None
        state.last_counters = {
            k: v for k, v in scrape.scalars.items() if k.signal in resets.WATCHED
        }
        if scrape.info and scrape.info != state.cache_info:
            state.cache_info = dict(scrape.info)
            rediscover = True
        if rediscover:
            state.behaviour.clear()  # a new configuration: the old behaviour proves nothing
        state.behaviour.append(_load(scrape.scalars))
        if rediscover:
            state.server = await state.scraper.info()
            state.knobs = self._discover(state)
            scrape = replace(scrape, knobs=dict(state.knobs), server=state.server)
        else:
            knobs = _infer(state)
            if knobs != state.knobs:
                state.knobs = knobs
                scrape = replace(scrape, knobs=dict(knobs))
        return scrape, events

    def _discover(self, state: EndpointState) -> dict[str, Knob]:
        process = None
        if state.local and self._probe is not None:
            process = self._probe(url_port(state.scraper.base))
        gpu_mem = None
        if state.local and self._last_gpu.gpus:
            gpu_mem = self._last_gpu.gpus[0].mem_total_bytes
        fp8 = cpu.local_cpu_server_knob() if process is not None else None
        knobs = discovery.merge(
            cache_info=state.cache_info,
            endpoint=state.server,
            process=process,
            flags=self._flags,
            gpu_mem_bytes=gpu_mem,
            host={fp8.name: fp8} if fp8 is not None else None,
        )
        knobs.update(self._endpoint_flags.get(state.scraper.url, {}))
        return knobs

    def status(self, endpoint: str) -> ConnectionStatus:
        return self.endpoints[endpoint].status(self._clock())


def _infer(state: EndpointState) -> dict[str, Knob]:
    """The endpoint's knobs, max_num_seqs inferred from its behaviour if nothing states it."""
    running, waiting, kv = zip(*state.behaviour, strict=True) if state.behaviour else ((), (), ())
    return discovery.with_inferred_max_num_seqs(state.knobs, running, waiting, kv)


def _load(scalars: Mapping[SeriesKey, float]) -> tuple[float | None, float | None, float | None]:
    """(running, waiting, KV usage) of a one-engine server; unknown (None) with several
    engines, whose caps are per engine and whose sums would not show one."""
    engines = {(k.model, k.engine) for k in scalars if k.signal == "running"}
    if len(engines) != 1:
        return None, None, None
    ((model, engine),) = engines

    def get(name: str) -> float | None:
        return scalars.get(SeriesKey(name, model, engine, ""))

    return get("running"), get("waiting"), get("kv_usage")
