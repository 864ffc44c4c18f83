"""Real time for a virtual-time twin: wall seconds x speed, caught up on demand.

The twin only moves when told to; live use (the sim server, the demo) wants it to keep pace
with the wall clock, possibly faster. `RealTime` remembers where wall time and virtual time
started and, on each `sync()`, advances the twin by however much virtual time the elapsed wall
time is worth. Catching up lazily is exact, not an approximation: the twin's state depends only
on virtual time, not on how the advance was chunked.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from vtop.sim.twin import Twin


class RealTime:
    """Maps wall time onto `twin`'s virtual time at `speed` virtual seconds per wall second."""

    def __init__(
        self, twin: Twin, speed: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.twin = twin
        self.speed = speed
        self._clock = clock
        self._wall0 = clock()
        self._virtual0 = twin.now

    def target(self) -> float:
        """The virtual time the twin should be at now."""
        return self._virtual0 + (self._clock() - self._wall0) * self.speed

    def sync(self) -> None:
        """Advance the twin to `target()` (never backwards). A twin moved ahead of it directly
        (warmed up after its server started) sets the clock's present: time runs on from there
        rather than standing still until the wall clock has caught up (minutes, during which
        a /metrics answer the twin has yet to reach would never come)."""
        lag = self.target() - self.twin.now
        if lag > 0:
            self.twin.advance(lag)
        elif lag < 0:
            self._virtual0 -= lag

    def wall_seconds(self, virtual_s: float) -> float:
        """How long `virtual_s` virtual seconds take on the wall clock."""
        return virtual_s / self.speed
