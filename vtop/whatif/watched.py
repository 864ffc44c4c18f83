"""What a twin is fitted to: one server's history, its knobs and its GPU, wherever they came from.

The what-if needs three things of a server and nothing else: the store its polls went into,
the knobs discovered for it, and the name of its GPU (which picks the hardware preset the fit
starts from). `Watched` holds them, so the wing takes them from whoever has them without
knowing who that is: the monitor (`Monitor.watched`, for the dashboard, the report and a live
`vtop whatif`), a recording (`read_trace`) or frames a test or a bench made (`from_frames`).
One loop turns frames into a `Watched`, for a trace and a simulated server alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from vtop.model import Frame, Knob
from vtop.signals.store import Store
from vtop.trace.reader import TraceError, TraceReader


@dataclass(frozen=True, slots=True)
class Watched:
    """One server as the twin sees it: its polls, its knobs, its GPU (None: not known)."""

    store: Store
    knobs: Mapping[str, Knob]
    gpu_name: str | None


def from_frames(frames: Iterable[Frame], *, capacity: int = 1_000_000) -> Watched | None:
    """The first endpoint of `frames` as a store (every poll, up to `capacity`), the last knobs
    it reported and the last GPU a frame named; None when no frame polled anything."""
    store: Store | None = None
    knobs: dict[str, Knob] = {}
    gpu: str | None = None
    for frame in frames:
        if not frame.scrapes:
            continue
        scrape = frame.scrapes[0]
        if store is None:
            store = Store(scrape.endpoint, capacity=capacity)
        if scrape.endpoint != store.endpoint:
            continue
        if scrape.knobs is not None:
            knobs = dict(scrape.knobs)
        store.ingest(scrape, frame.gpu)
        if frame.gpu is not None and frame.gpu.gpus:
            gpu = frame.gpu.gpus[0].name
    return Watched(store, knobs, gpu) if store is not None else None


def read_trace(path: str, *, warn: Callable[[str], None] | None = None) -> Watched:
    """The trace's first endpoint (`from_frames`); `TraceError` when it holds fewer than two
    polls of it, too few to fit a twin to. `warn` hears what the reader skipped."""
    with TraceReader(path, warn=warn) as reader:
        watched = from_frames(reader.frames())
    if watched is None or len(watched.store) < 2:
        raise TraceError(f"{path}: fewer than two polls to fit a twin to")
    return watched
