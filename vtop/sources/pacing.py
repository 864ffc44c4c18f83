"""When the next poll is due: faster for the first seconds after attaching, then the interval.

A user attaches vtop during an incident and wants the verdict before they finish reading the
screen; the rules want seconds of evidence, and four polls a second gather their samples four
times as fast as one. So for `WARM_UP_S` after the first successful poll a consumer polls every
`WARM_INTERVAL_S`, but only while every endpoint answered within `FAST_ANSWER_S`: a front end
that answers slowly is the one that cannot spare the work (a starved API server serves stale
gauges already, and four scrapes a second would starve it more), and a poll never comes sooner
than the last one answered. A slow or failed answer ends the warm-up at once.

Request timeouts stay those of the interval (`vtop.sources.vllm.timeout_for`): a warm-up poll
that answers late delays the next one, it does not fail.

Sources that may be paced this way offer `pace(seconds)` (`vtop.sources.base.Paced`): the
simulator advances its clock by the time to the next poll; a live source has nothing to change.
"""

from __future__ import annotations

from vtop.model import Frame

WARM_UP_S = 15.0
WARM_INTERVAL_S = 0.25
FAST_ANSWER_S = 0.05
"""A /metrics answer within this leaves the front end idle at least 80% of the time at 4 Hz."""


class Pacer:
    """The delay from one poll's start to the next one's, warm-up included."""

    def __init__(self, interval_s: float, *, warm_up_s: float = WARM_UP_S) -> None:
        self.interval_s = interval_s
        self.warm_up_s = warm_up_s
        self._first_ok: float | None = None
        self._warm = True

    def next_after(self, frame: Frame) -> float:
        """Seconds from the start of the poll that produced `frame` to the next poll."""
        latencies = [s.latency_s for s in frame.scrapes if s.ok and s.latency_s is not None]
        if self._first_ok is None and latencies:
            self._first_ok = frame.t
        if not self._warm or self._first_ok is None or self.interval_s <= WARM_INTERVAL_S:
            return self.interval_s
        if (
            frame.t - self._first_ok >= self.warm_up_s
            or len(latencies) < len(frame.scrapes)
            or max(latencies) > FAST_ANSWER_S
        ):
            self._warm = False  # over, or the front end is not one to hurry: for good
            return self.interval_s
        return WARM_INTERVAL_S

    @property
    def warming(self) -> bool:
        """Whether polls still come faster than the interval."""
        return self._warm and self._first_ok is not None
