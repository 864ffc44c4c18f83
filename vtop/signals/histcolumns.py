"""How a series' histograms are held: one column of floats per bucket, read back lazily.

A column of floats per bucket (plus count and sum) holds a poll's histogram in 8 bytes per
bucket; a `Histogram` object per poll would cost several times that, and an hour of history
for every latency histogram of a data-parallel server adds up. So a `Histogram` is built only
when a poll is asked for (`HistTrack.at`), and a window of them (`HistColumn`, what charts
read) is a view that builds none until indexed. The `Store` (`vtop.signals.store`) owns the
tracks; this module is only their layout, kept apart so the store reads as ingest and questions.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import overload

from vtop.model import Histogram

NAN = math.nan


class HistTrack:
    """Cumulative, reset-adjusted histograms of one series, one column per bucket."""

    __slots__ = ("bounds", "cols", "last", "last_raw", "offset", "present")

    def __init__(self, polls: int) -> None:
        self.bounds: tuple[float, ...] | None = None
        self.cols: list[array[float]] = []
        self.present = array("b", bytes(polls))
        self.last_raw: Histogram | None = None
        self.offset: Histogram | None = None
        self.last: Histogram | None = None

    def __len__(self) -> int:
        return len(self.present)

    def append(self, h: Histogram | None) -> None:
        if h is None:
            self.present.append(0)
            for col in self.cols:
                col.append(NAN)
            return
        if h.bounds != self.bounds:
            self.bounds = h.bounds
            self.cols = [array("d", [NAN]) * len(self.present) for _ in range(len(h.bounds) + 2)]
            self.present = array("b", bytes(len(self.present)))
        self.present.append(1)
        cols = self.cols
        for col, v in zip(cols, h.buckets, strict=False):
            col.append(v)
        cols[-2].append(h.count)
        cols[-1].append(h.sum)

    def at(self, i: int) -> Histogram | None:
        if not self.present[i] or self.bounds is None:
            return None
        cols = self.cols
        return Histogram(self.bounds, tuple(col[i] for col in cols[:-2]), cols[-2][i], cols[-1][i])

    def drop(self, n: int) -> None:
        del self.present[:n]
        for col in self.cols:
            del col[:n]


class HistColumn(Sequence[Histogram | None]):
    """A window of one histogram series, read lazily (see `Store.hist_values`)."""

    def __init__(self, track: HistTrack | None, start: int, end: int) -> None:
        self._track = track
        self._start = start
        self._len = max(0, end - start)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> Histogram | None: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Histogram | None]: ...

    def __getitem__(self, i: int | slice) -> Histogram | Sequence[Histogram | None] | None:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        return None if self._track is None else self._track.at(self._start + i)

    def present(self) -> list[bool]:
        """Which polls of the window hold a histogram (without building any)."""
        if self._track is None:
            return [False] * self._len
        return [bool(p) for p in self._track.present[self._start : self._start + self._len]]
