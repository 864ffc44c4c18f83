"""What every source of frames offers, so the TUI, report and recorder never ask which it is.

Live endpoints, the in-process simulator and a trace being replayed all implement this:
`poll()` returns the next `Frame`, `status()` says how an endpoint's connection stands (a
`ConnectionStatus`: the screens read its fields, and print its `text`), and `aclose()`
releases what the source holds.

A source that can read the past (Prometheus) may also offer `async history() -> list[Frame]`:
called before the first poll, it returns the backfill as one frame per step, oldest first, for
consumers that want to step through it (a report's timeline); `poll()` alone returns the same
past in its first frame, so a consumer that ignores `history` still gets it.

A source whose request timeouts depend on the poll interval (live endpoints: longer with a
long one, never under a floor) also offers `set_interval(seconds)`; a consumer that changes the
interval calls `retime(source, seconds)`, which does nothing for a source without it.

A source that may be polled faster for the first seconds after attaching (`vtop.sources.pacing`)
offers `pace(seconds)`: the time from this poll to the next. The simulator advances its virtual
clock by it; a live endpoint's request timeouts stay those of the interval. A consumer asks
`warms_up(source)` whether to warm up at all: a trace or a Prometheus history gains nothing.

A source that reads the host vtop runs on (its CPU and memory, vtop's own cost) with each frame
may offer `sample_host(on)`: those readings go only into recordings, so a consumer that records
some of the time (the TUI's `r`) turns them on while it records, through `sample_host(source,
on)`, and saves their cost (a few /proc reads a poll) the rest of the time.

What a source is, a consumer learns from the source too, never from its class. `watching(source)`
names what it watches, as a report and a recording's header name it (endpoint URLs without
secrets, a Prometheus query, a scenario). `real_time(source)` says whether its polls read the
servers as they are now, so that two polls tell what happened between them only when an
interval passed in between (live endpoints); a simulation's clock moves with each poll, and
Prometheus's history or a trace already hold the past. `simulated(source)` hands back a
simulation, whose virtual time a consumer may run flat out (`poll_now()`), or None.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from vtop.model import Frame
from vtop.sources.status import ConnectionStatus


class FrameSource(Protocol):
    """A producer of frames, polled once per interval by its consumer."""

    async def poll(self) -> Frame:
        """The next frame. Never raises for a failing endpoint: that is in `Scrape.error`."""
        ...

    def status(self, endpoint: str) -> ConnectionStatus:
        """How the endpoint's connection stands."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Retimable(Protocol):
    """A source whose request timeouts follow the poll interval."""

    def set_interval(self, interval_s: float) -> None: ...


def retime(source: object, interval_s: float) -> None:
    """Tell `source` the poll interval is now `interval_s`, if its timeouts depend on it."""
    if isinstance(source, Retimable):
        source.set_interval(interval_s)


@runtime_checkable
class Paced(Protocol):
    """A source that may be polled faster than the interval while a warm-up lasts."""

    def pace(self, seconds: float) -> None: ...


def pace(source: object, seconds: float) -> None:
    """Tell `source` the next poll comes `seconds` after this one, if that matters to it."""
    if isinstance(source, Paced):
        source.pace(seconds)


def warms_up(source: object) -> bool:
    """Whether a consumer should poll `source` faster while a warm-up lasts."""
    return isinstance(source, Paced)


@runtime_checkable
class HostSampling(Protocol):
    """A source whose frames carry host readings only while asked to."""

    def sample_host(self, on: bool) -> None: ...


def sample_host(source: object, on: bool) -> None:
    """Ask `source` to read the host with each frame (or to stop), if it reads the host."""
    if isinstance(source, HostSampling):
        source.sample_host(on)


@runtime_checkable
class Watching(Protocol):
    """A source that names what it watches."""

    def watching(self) -> list[str]: ...


def watching(source: object) -> list[str]:
    """What `source` watches, for reports and recordings ([] when it does not say)."""
    return source.watching() if isinstance(source, Watching) else []


@runtime_checkable
class RealTime(Protocol):
    """A source that says whether its polls read the servers as they are at that moment."""

    real_time: bool


def real_time(source: object) -> bool:
    """Whether polls of `source` must be an interval apart to say what happened in between."""
    return isinstance(source, RealTime) and source.real_time


@runtime_checkable
class Simulated(Protocol):
    """A source in virtual time: `poll_now()` computes the next poll at once."""

    interval_s: float
    speed: float

    def poll_now(self) -> Frame: ...

    def pace(self, seconds: float) -> None: ...


def simulated(source: object) -> Simulated | None:
    """`source` as a simulation whose virtual time may run flat out, or None."""
    return source if isinstance(source, Simulated) else None
