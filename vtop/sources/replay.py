"""A recorded trace as a `FrameSource`: the same frames, in order, on a virtual clock.

Whatever drew or judged the live server draws and judges the replay, because all it receives
is `Frame`s. What a player needs on top is a clock it controls: `speed` (1× to 1000×), play
and pause, `step()`, `seek(t)`, and jumps to the next or previous *mark* (the times where a
finding starts, computed by whoever evaluates rules and handed over with `set_marks`, since
a source knows nothing of rules).

Two ways to consume it:
- `await poll()` returns the next frame when the virtual clock reaches it (immediately with
  `paced=False`), like a live source; `EndOfTrace` after the last one.
- `due()` returns, without waiting, every frame the clock has passed since the last call
  (bounded), which is what a screen refreshing at 10 Hz wants at 1000×.

`seek(t)` returns the frames of the `lookback_s` before `t`: a consumer builds a fresh
`Monitor` from them, so windows, rates and rules at the new position are what they were live.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable, Iterator

from vtop.model import Frame
from vtop.sources.status import ConnectionStatus
from vtop.trace.reader import TraceReader

SPEEDS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
MIN_SPEED, MAX_SPEED = SPEEDS[0], SPEEDS[-1]
MAX_DUE = 5000
"""Most frames `due()` hands back at once; the clock is held back rather than flood a screen."""


class EndOfTrace(Exception):
    """`poll()` past the last recorded frame."""


class ReplaySource:
    """Frames of a trace on a virtual clock; implements `FrameSource`."""

    def __init__(
        self,
        reader: TraceReader,
        *,
        speed: float = 1.0,
        start: float | None = None,
        end: float | None = None,
        paced: bool = True,
        playing: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.start = reader.start if start is None else start
        self.end = end
        self.paced = paced
        self._clock = clock
        self._speed = _clamp(speed)
        self._playing = playing
        self._marks: list[float] = []
        self._labels: list[str] = []
        self._resumed = asyncio.Event()
        if playing:
            self._resumed.set()
        self._open(self.start)

    # -- position ------------------------------------------------------------------------------

    def _open(self, t: float | None) -> None:
        self._it: Iterator[Frame] = self.reader.frames(t, self.end)
        self._next: Frame | None = next(self._it, None)
        self.position = self._next.t if self._next is not None else (t or 0.0)
        """Virtual time: the last frame handed out, or where the next one will come from."""
        self._anchor(self.position)

    def _anchor(self, t: float) -> None:
        self._anchor_t = t
        self._anchor_wall = self._clock()

    def _now(self) -> float:
        if not self._playing:
            return self._anchor_t
        return self._anchor_t + (self._clock() - self._anchor_wall) * self._speed

    def _take(self) -> Frame:
        frame = self._next
        assert frame is not None
        self._next = next(self._it, None)
        self.position = frame.t
        return frame

    @property
    def at_end(self) -> bool:
        return self._next is None

    @property
    def next_t(self) -> float | None:
        return self._next.t if self._next is not None else None

    # -- controls ------------------------------------------------------------------------------

    @property
    def playing(self) -> bool:
        return self._playing

    def play(self) -> None:
        if not self._playing:
            self._anchor(self.position)
            self._playing = True
            self._resumed.set()

    def pause(self) -> None:
        if self._playing:
            self._anchor(min(self._now(), self.next_t or self.position))
            self._playing = False
            self._resumed.clear()

    def toggle(self) -> None:
        self.pause() if self._playing else self.play()

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        self._anchor(self._now())
        self._speed = _clamp(value)

    def faster(self) -> float:
        i = bisect.bisect_right(SPEEDS, self._speed)
        self.speed = SPEEDS[min(i, len(SPEEDS) - 1)]
        return self._speed

    def slower(self) -> float:
        i = bisect.bisect_left(SPEEDS, self._speed) - 1
        self.speed = SPEEDS[max(i, 0)]
        return self._speed

    def step(self, n: int = 1) -> list[Frame]:
        """Pause and hand out the next `n` frames."""
        self.pause()
        out: list[Frame] = []
        while self._next is not None and len(out) < n:
            out.append(self._take())
        self._anchor(self.position)
        return out

    def seek(self, t: float, *, lookback_s: float = 600.0) -> list[Frame]:
        """Move to `t`; returns the frames in [t - lookback_s, t] to rebuild history from.

        The next frame handed out is the first after `t`. Play/pause state is kept."""
        lo = self.start if self.start is not None else t
        t = max(t, lo)
        hi = self.end if self.end is not None else self.reader.end
        if hi is not None:
            t = min(t, hi)
        history = list(self.reader.frames(max(lo, t - lookback_s), t))
        self._open(history[-1].t + 1e-6 if history else t)
        if history:
            self.position = history[-1].t
            self._anchor(self.position)
        return history

    def step_back(self, *, lookback_s: float = 600.0) -> list[Frame]:
        """Pause and go back one frame; returns history as `seek` does."""
        self.pause()
        lo = self.start if self.start is not None else self.position
        times = list(self.reader.times(max(lo, self.position - 60.0), self.position))
        target = times[-2] if len(times) >= 2 else lo
        return self.seek(target, lookback_s=lookback_s)

    # -- marks (where findings start) ----------------------------------------------------------

    def set_marks(self, marks: list[tuple[float, str]]) -> None:
        """Times (and a label each) the timeline can jump between, e.g. findings starting."""
        ordered = sorted(marks)
        self._marks = [t for t, _ in ordered]
        self._labels = [label for _, label in ordered]

    @property
    def marks(self) -> list[tuple[float, str]]:
        return list(zip(self._marks, self._labels, strict=True))

    def next_mark(self, after: float | None = None) -> tuple[float, str] | None:
        at = self.position if after is None else after
        i = bisect.bisect_right(self._marks, at + 1e-6)
        return (self._marks[i], self._labels[i]) if i < len(self._marks) else None

    def previous_mark(self, before: float | None = None) -> tuple[float, str] | None:
        at = self.position if before is None else before
        i = bisect.bisect_left(self._marks, at - 1e-6) - 1
        return (self._marks[i], self._labels[i]) if i >= 0 else None

    # -- FrameSource ---------------------------------------------------------------------------

    def due(self, limit: int = MAX_DUE) -> list[Frame]:
        """Every frame the virtual clock has passed, without waiting (at most `limit`)."""
        now = self._now() if self.paced else float("inf")
        out: list[Frame] = []
        while self._next is not None and self._next.t <= now and len(out) < limit:
            out.append(self._take())
        if len(out) == limit and self._playing:
            self._anchor(self.position)
        return out

    async def poll(self) -> Frame:
        """The next frame, when the virtual clock reaches it. Raises `EndOfTrace`."""
        while True:
            if self._next is None:
                raise EndOfTrace(f"end of {self.reader.name}")
            if not self.paced:
                return self._take()
            if not self._playing:
                await self._resumed.wait()
                continue
            wait = (self._next.t - self._now()) / self._speed
            if wait <= 0:
                return self._take()
            await asyncio.sleep(min(wait, 0.1))

    def status(self, endpoint: str) -> ConnectionStatus:
        if self._next is None:
            return ConnectionStatus("replay", detail="replay: end of trace")
        state = "playing" if self._playing else "paused"
        return ConnectionStatus("replay", detail=f"replay {state} ×{self._speed:g}")

    async def aclose(self) -> None:
        self.reader.close()


def _clamp(speed: float) -> float:
    return max(MIN_SPEED, min(MAX_SPEED, float(speed)))
