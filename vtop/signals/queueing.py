"""Little's law over a window: the queue the waiting gauge showed against the queue the window's
queue times say there was.

A request's queue time is recorded as it finishes, up to its end-to-end latency after it
waited, so a window's queue-time histogram describes the requests that finished in it, which
may have queued before it (a burst at the load's start read 100 % queueing 30 s later with
nothing waiting; 30 requests waiting at every poll beside a queue p50 of 0.2 s, from the load's
first requests, admitted at once). By Little's law the mean number waiting is the seconds of
queueing per second: where the two sides agree the queue times describe the window. The rules
(`queue_seen`, `vtop.triage.windowed`) and the twin's self-check (`vtop.whatif.check`) read it
here, the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtop.model import SeriesKey
from vtop.signals.store import Store


@dataclass(frozen=True, slots=True)
class QueueSeen:
    """Both sides of Little's law over one window."""

    waiting: float
    """The waiting gauge's mean over the window's polls."""
    recorded: float
    """Seconds of queueing per second by the queue times recorded in the window."""
    finished: float
    """The requests whose queue times those are (those that finished in it)."""
    seconds: float
    """The seconds the window's polls span."""

    @property
    def ratio(self) -> float | None:
        """The gauge over the recorded queue: near 1 where the queue times describe the
        window, far under where the requests queued before it; None without recorded queue."""
        return self.waiting / self.recorded if self.recorded > 0 else None


def queue_seen(
    store: Store, window_s: float | None, waiting: SeriesKey, queue_time: SeriesKey
) -> QueueSeen | None:
    """Little's law's two sides over the window (the series `waiting` and `queue_time`), or
    None without two polls, a known waiting gauge or a queue time recorded in it."""
    times = store.times(window_s)
    gauge = [w for w in store.values(waiting, window_s) if w is not None]
    queued = store.hist_delta(queue_time, window_s)
    if len(times) < 2 or not gauge or queued is None or not queued.count:
        return None
    seconds = times[-1] - times[0]
    if seconds <= 0:
        return None
    return QueueSeen(sum(gauge) / len(gauge), queued.sum / seconds, queued.count, seconds)
