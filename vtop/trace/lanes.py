"""The decoder's lanes: every series' slots side by side, and where one series' slots start.

A poll's deltas come in four lanes (`codec`: 1, 2, 4 or 8 bytes a value), each a list with the
slots of its series side by side in `Lane.order`. A redefinition or a move reshuffles that
order, and doing it naively once let a crafted trace cost minutes (see `Lane`); the
bookkeeping has this module so its invariants read on their own, apart from the byte-level
decoding that drives it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from vtop.trace.metadata import Path


@dataclass(slots=True, eq=False)
class DecodedSeries:
    """A series as the decoder holds it: its path, kind, lane, divisor and slots."""

    sid: int
    path: Path
    kind: int
    lane: int
    div: float
    bounds: tuple[float, ...]
    n: int
    pos: int = -1
    """Its place in its lane's `order` (set when the lane takes it in)."""
    values: list[int] | None = None
    """Its slots' values while it waits, within one body, to be appended to its lane."""


class Lane:
    """One lane's series in slot order, and where each one's slots start.

    A redefinition or a move takes a series out of the middle of its lane and appends it at
    the end, shifting the slots of every series after it. Renumbering them all made a body
    that redefines every series cost series² (a 1 MB file, 40 minutes). Here the offsets are
    prefix sums in a Fenwick tree over `order`: taking one out costs log(series), a removed
    series leaves a hole (None) and the holes are swept out once they are half of `order`."""

    __slots__ = ("dead", "order", "tree")

    def __init__(self) -> None:
        self.order: list[DecodedSeries | None] = []
        self.tree: list[int] = [0]
        self.dead = 0

    def __iter__(self) -> Iterator[DecodedSeries]:
        return (s for s in self.order if s is not None)

    def start(self, pos: int) -> int:
        """Slots before `order[pos]`."""
        tree, total = self.tree, 0
        while pos > 0:
            total += tree[pos]
            pos &= pos - 1
        return total

    def append(self, s: DecodedSeries) -> None:
        s.pos = len(self.order)
        self.order.append(s)
        i = s.pos + 1  # the tree counts from 1: its node i sums the slots of (i - lowbit i, i]
        tree, v, j, stop = self.tree, s.n, i - 1, i - (i & -i)
        while j > stop:
            v += tree[j]
            j &= j - 1
        tree.append(v)

    def discard(self, pos: int, n: int) -> None:
        """Take `order[pos]` (of `n` slots) out; positions stay valid until `sweep`."""
        self.order[pos] = None
        self.dead += 1
        tree, i = self.tree, pos + 1
        while i < len(tree):
            tree[i] -= n
            i += i & -i

    def sweep(self) -> None:
        """Drop the holes once they are half of `order` (each costs O(1) amortised)."""
        if self.dead <= 64 or 2 * self.dead <= len(self.order):
            return
        alive = [s for s in self.order if s is not None]
        tree = [0, *(s.n for s in alive)]
        for i, s in enumerate(alive, 1):
            s.pos = i - 1
            j = i + (i & -i)
            if j < len(tree):
                tree[j] += tree[i]
        self.order, self.tree, self.dead = list(alive), tree, 0
