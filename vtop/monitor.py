"""The one consumer of frames: history per endpoint, its configuration, and (later) verdicts.

The TUI, `--report`, `--once` and replay all feed `Frame`s into a `Monitor` and read from it;
none of them keeps history of its own. This is the "one data path": whatever a source is, the
numbers on the screen, in the report and in a replayed trace come from the same code.

After each frame the triage engine evaluates every endpoint it polled (`EndpointView.findings`),
so every consumer reads the same verdicts the same poll produced. Before that, endpoints that
serve the same model are compared (`vtop.triage.replicas`) and each one's standing among its
replicas is written into its own history, so a replica carrying the load of its idle peers is
a finding like any other (issue 7).

GPU readings are attributed only to endpoints on this host: NVML sees the local GPUs, and
charging them to a remote server would be a lie. The GPUs to show (`Monitor.gpus`) are NVML's
and those the endpoints' pages carry (dcgm-exporter series), by `vtop.signals.gpus`: the
GPU panel, `--once` and `--report` read the same ones. What the twin is fitted to
(`Monitor.watched`: an endpoint's store, knobs and GPU) is handed to `vtop.whatif` as plain
values: the wing never sees the monitor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vtop.model import EndpointInfo, Event, Finding, Frame, GpuStatus, HostReading, Knob, Scrape
from vtop.signals import gpus
from vtop.signals.store import Store
from vtop.sources.live import is_local
from vtop.triage import replicas
from vtop.triage.engine import Engine
from vtop.whatif.watched import Watched


@dataclass(slots=True)
class EndpointView:
    """Everything known about one endpoint."""

    store: Store
    local: bool
    knobs: dict[str, Knob] = field(default_factory=dict)
    server: EndpointInfo = field(default_factory=EndpointInfo)
    last: Scrape | None = None
    findings: list[Finding] = field(default_factory=list)
    """The rule engine's verdicts after the latest scrape (firing first)."""


class Monitor:
    """Ingests frames; owns the history of every endpoint and the triage engine."""

    def __init__(self, *, capacity: int = 3600, engine: Engine | None = None) -> None:
        self.capacity = capacity
        self.engine = engine if engine is not None else Engine.from_catalog()
        self.endpoints: dict[str, EndpointView] = {}
        self.gpu = GpuStatus(unavailable="not read yet")
        self.host: HostReading | None = None
        self.frames = 0
        self.t: float | None = None

    @property
    def gpus(self) -> GpuStatus:
        """The GPUs to show: this host's NVML reading (`gpu`) and the endpoints' pages'."""
        return gpus.shown(
            self.gpu, [(v.last, v.local) for v in self.endpoints.values() if v.last is not None]
        )

    def watched(self, endpoint: str) -> Watched | None:
        """What the twin is fitted to for `endpoint` (None: never polled): its store, knobs and
        GPU. The GPU is the first shown (this host's, NVML) when the server runs here, else the
        first its own page names (dcgm-exporter series); None when neither says, and the fit
        says what it assumed."""
        view = self.endpoints.get(endpoint)
        if view is None:
            return None
        shown = [g.name for g in self.gpus.gpus] if view.local else []
        names = shown or gpus.page_names(view.store.info)
        return Watched(view.store, view.knobs, names[0] if names else None)

    def view(self, endpoint: str) -> EndpointView:
        view = self.endpoints.get(endpoint)
        if view is None:
            view = EndpointView(Store(endpoint, capacity=self.capacity), is_local(endpoint))
            self.endpoints[endpoint] = view
        return view

    def configure(self, scrape: Scrape) -> EndpointView:
        """Take what a poll says of its endpoint's configuration (knobs, server info) without
        ingesting the poll: a consumer that skips polls (a report over a long trace) keeps the
        configuration current, and the next evaluation reads it as if the poll had been fed."""
        view = self.view(scrape.endpoint)
        if scrape.knobs is not None:
            view.knobs = dict(scrape.knobs)
        if scrape.server is not None:
            view.server = scrape.server
        return view

    def feed(self, frame: Frame) -> list[Event]:
        """Ingest one frame; returns the events it carried or revealed."""
        self.frames += 1
        self.t = frame.t
        self.gpu = frame.gpu
        self.host = frame.host
        events = list(frame.events)
        for ev in frame.events:
            if ev.endpoint in self.endpoints:
                self.endpoints[ev.endpoint].store.note(ev)
        # A frame may carry several polls of one endpoint (Prometheus's history arrives as one
        # frame, in time order): each round of polls is evaluated before the next one, so the
        # rules step through the history as they would have live.
        fed: dict[str, EndpointView] = {}
        for scrape in frame.scrapes:
            if scrape.endpoint in fed:
                self._judge(fed)
                fed = {}
            view = self.configure(scrape)
            view.last = scrape
            gpu, host = (frame.gpu, frame.host) if view.local else (None, None)
            events.extend(view.store.ingest(scrape, gpu, host))
            fed[scrape.endpoint] = view
        self._judge(fed)
        return events

    def _judge(self, fed: dict[str, EndpointView]) -> None:
        """Compare the replicas, then evaluate the endpoints just polled."""
        if len(self.endpoints) > 1:
            replicas.update(self._members(), {ep: v.store for ep, v in fed.items()})
        for view in fed.values():
            view.findings = self.engine.evaluate(view)

    def _members(self) -> list[replicas.Member]:
        return [
            replicas.Member(ep, v.server.models, v.store, v.last is not None and v.last.ok)
            for ep, v in self.endpoints.items()
        ]
