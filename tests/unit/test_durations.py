"""One grammar for every duration a user types, and the shapes vtop prints them in.

`--duration`, `--backfill`, a rule's `for:`/`window:`/`evidence:`, a rule test's `eval_time`
and the replay's `--from`/`--to` all read through `vtop.durations`, so each accepts what the
others do (`1h30m` for a backfill, `1d` for a rule's `for`) and refuses the same text the same
way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vtop import durations
from vtop.triage.loader import load_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("0.5", 0.5),
        ("90s", 90),
        ("5m", 300),
        ("1h30m", 5400),
        ("250ms", 0.25),
        ("1d", 86400),
        ("1D", 86400),
        (" 2m ", 120),
        ("0", 0),
    ],
)
def test_the_grammar(text: str, seconds: float) -> None:
    assert durations.parse(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5 m", "m5", "-5", "-5m", "1h-30m", "inf", "nan"])
def test_what_is_not_a_duration_is_one_line(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a duration \(try 30s, 5m, 1h30m\)$"):
        durations.parse(text)


@given(st.integers(min_value=0, max_value=10**10))
def test_exact_reads_back(ms: int) -> None:
    text = durations.exact(ms / 1000)
    assert durations.parse(text) == pytest.approx(ms / 1000)
    assert durations.is_promql(text) or ms == 0


def test_the_printed_shapes() -> None:
    assert [durations.exact(s) for s in (120, 90, 3600, 5400, 0.5)] == [
        "2m",
        "90s",
        "1h",
        "90m",
        "500ms",
    ]
    assert [durations.span(s) for s in (12, 303, 7440, 93600)] == [
        "12 s",
        "5m 03s",
        "2h 04m",
        "1d 02h",
    ]
    assert [durations.compact(s) for s in (45, 720, 11_520, 200_000)] == [
        "45s",
        "12m",
        "3h12m",
        "2d7h",
    ]
    assert durations.compact(-1) == "–" and durations.compact(None) == "–"
    assert durations.hms(123) == "2m 03s" and durations.hms(3723) == "1h 02m 03s"
    assert durations.clock(181) == "3:01" and durations.clock(3723) == "1:02:03"


def test_times_in_a_trace() -> None:
    start, end = 1_750_000_000.0, 1_750_003_600.0
    assert durations.parse_time("+5m", start, end) == start + 300
    assert durations.parse_time("-10m", start, end) == end - 600
    assert durations.parse_time("90", start, end) == start + 90
    assert durations.parse_time("2025-06-15T15:06:40Z", start, end) == 1_750_000_000.0
    with pytest.raises(ValueError, match="is not a time"):
        durations.parse_time("yesterday", start, end)


def test_a_rule_may_wait_a_day() -> None:
    """A rule's `for: 1d` was refused while `--duration 1d` was read: one grammar now."""
    text = (ROOT / "rules" / "underloaded.yaml").read_text()
    loaded = load_text(text.replace("for: ", "for: 1d #", 1), "underloaded.yaml")
    assert not loaded.errors, loaded.errors
    assert loaded.rules["underloaded"].for_s == 86400


def test_a_backfill_of_an_hour_and_a_half_is_read() -> None:
    """`--backfill 1h30m` was refused while `--duration 1h30m` was read."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "--prometheus",
            "http://127.0.0.1:9",
            "--backfill",
            "1h30m",
            "--report",
            "--duration",
            "1s",
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert "not a duration" not in out.stderr, out.stderr
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "--prometheus",
            "http://127.0.0.1:9",
            "--backfill",
            "an hour",
            "--report",
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 3 and "'an hour' is not a duration" in out.stderr, out.stderr
