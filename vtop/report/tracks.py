"""Each finding followed across the window's evaluations: when it fired, and whether it counts.

A finding is reported if it fired, or was explained away (suppressed) by a root cause, at any
evaluation of the window, with the first and last time it did. What it says is what the live
engine said at its last such evaluation: its state then (firing, or suppressed by which rule and
since when), summary, evidence and advice, so the report never contradicts the screen. A `Track`
therefore keeps the finding as last seen, not a merge of every evaluation.

The status counts a finding's firing only if no root cause came to explain it in the same
episode (a run of evaluations where it fires or is suppressed): a symptom that fires before
its cause has waited out its own `for` is the same problem, seen early, and the cause's finding
carries it. So a track settles what counts per episode (`end_episode`), and `ranked` puts what
counts first, worst first, then what still fires at the end, in the engine's root-cause order.
This module knows nothing of frames, windows or the document: `vtop.report.collect` feeds it
findings, `vtop.report.build` writes its tracks down.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from vtop.model import Finding, Severity


@dataclass(slots=True)
class Track:
    finding: Finding
    """The finding at the last evaluation it fired or was suppressed: what the engine says."""
    first_t: float
    last_t: float
    worst: Severity
    evaluations: int = 1
    active: bool = True
    starts: list[float] = field(default_factory=list)
    """Times it began firing (again): where a replay's timeline puts its marks."""
    onset: Finding | None = None
    """The finding as it was when it first fired: what training reveals."""
    state_since: float = 0.0
    """When its current state (firing, or suppressed by the same rule) began."""
    rank: int = 0
    """Its place in the engine's order at its last evaluation (firing, severity, root cause)."""
    episode: Severity | None = None
    """The worst it fired at in the current episode since a root cause last explained it."""
    counted: Severity | None = None
    """The worst it fired at in episodes that ended unexplained."""

    def observe(self, f: Finding, t: float, rank: int) -> None:
        """One more evaluation at which it fires or is suppressed."""
        if (f.state, f.suppressed_by) != (self.finding.state, self.finding.suppressed_by):
            self.state_since = t
        firing = f.state == "firing"
        if firing and (not self.active or self.onset is None):
            self.starts.append(t)
        if firing and self.onset is None:
            self.onset = f
        if firing:
            self.episode = f.severity if self.episode is None else max(self.episode, f.severity)
        else:  # a root cause explains it: what it said before is that cause's to carry
            self.episode = None
        self.finding, self.worst, self.rank = f, max(self.worst, f.severity), rank
        self.last_t = t
        self.evaluations += 1
        self.active = True

    def end_episode(self) -> None:
        """It stopped firing and stopped being explained: its episode is settled."""
        if self.active and self.episode is not None:
            self.counted = self.episode if self.counted is None else max(self.counted, self.episode)
        self.episode = None
        self.active = False

    @property
    def counts(self) -> Severity | None:
        """The severity it adds to the status, or None when every firing was explained."""
        levels = [s for s in (self.counted, self.episode) if s is not None]
        return max(levels) if levels else None

    @property
    def firing_at_end(self) -> bool:
        return self.active and self.finding.state == "firing"


def ranked(tracks: Iterable[Track]) -> list[Track]:
    """Findings in the report's order: those that count for the status first, worst first,
    then what still fires at the end in the engine's root-cause order, then the rest."""

    def key(t: Track) -> tuple[int, int, int, int, float]:
        level = t.counts if t.counts is not None else t.worst
        return (t.counts is None, -level, not t.firing_at_end, t.rank, t.first_t)

    return sorted(tracks, key=key)


def explained_by(cause: Track, ranked: list[Track]) -> list[str]:
    """The rules `cause` explains (suppresses) at the end of the window, in `ranked`'s
    order."""
    return [
        t.finding.rule
        for t in ranked
        if t.active
        and t.finding.state == "suppressed"
        and t.finding.suppressed_by == cause.finding.rule
        and t.finding.endpoint == cause.finding.endpoint
    ]
