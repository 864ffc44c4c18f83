"""Evidence windows: a rule's `(5 min)` over a younger history says what it covers."""

from __future__ import annotations

from vtop.triage.template import covered


def test_a_window_longer_than_the_history_reads_as_the_history_it_covers() -> None:
    text = "At the cap with a queue: 64% of polls (5 min)"
    assert covered(text, 42.0) == "At the cap with a queue: 64% of polls (last 42 s)"
    assert covered(text, 300.0) == text  # the whole window is there
    assert covered("TTFT p90 (2 min): 1 s; fill (30 s): 5%", 90.0) == (
        "TTFT p90 (last 1m 30s): 1 s; fill (30 s): 5%"
    )
    assert covered("(5 minutes) (5min) 5 min", 1.0) == "(5 minutes) (5min) 5 min"  # not windows
