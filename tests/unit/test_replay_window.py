"""`--from`/`--to` on a replay (issue 26, point 10): a time of day before the first poll stays
on the trace's day, a window wider than the trace is the trace (its rule step and its verdict
unchanged), and a time that is no time of day is one line.

The trace is the shipped `budget-too-small.vtrace`: 15 minutes from 2025-06-15 15:08:11Z, a
WARNING when read whole."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vtop import durations

ROOT = Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "traces" / "budget-too-small.vtrace")
START = datetime(2025, 6, 15, 15, 8, 11, 2000, tzinfo=UTC).timestamp()
END = START + 901.0


def report(*args: str) -> tuple[int, dict[str, object] | str]:
    result = subprocess.run([sys.executable, "-m", "vtop", "--replay", TRACE, "--report",
                             "--format", "json", *args], capture_output=True, text=True,
                            cwd=ROOT, timeout=120, check=False)  # fmt: skip
    if result.returncode == 3 and not result.stdout:
        return 3, result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.fixture(scope="module")
def whole() -> dict[str, object]:
    code, doc = report()
    assert code == 1 and isinstance(doc, dict)
    assert doc["status"] == "WARNING"
    return doc


def window(doc: dict[str, object]) -> dict[str, object]:
    w = doc["window"]
    assert isinstance(w, dict)
    return w


def rules(doc: dict[str, object]) -> list[str]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    return [f["rule"] for f in findings]


@pytest.mark.parametrize(
    "args",
    [
        ["--from", "15:08"],  # before the first poll (15:08:11), on its day
        ["--from=-99999999d"],  # 273,000 years before the end
        ["--from=-1e308"],
        ["--from", "2000-01-01T00:00:00Z", "--to", "2100-01-01T00:00:00Z"],
        ["--to", "+99999999d"],
    ],
)
def test_a_window_wider_than_the_trace_is_the_trace(
    whole: dict[str, object], args: list[str]
) -> None:
    code, doc = report(*args)
    assert isinstance(doc, dict), doc
    assert (code, doc["status"]) == (1, "WARNING")
    assert window(doc) == window(whole)  # the same polls, the same rule step
    assert rules(doc) == rules(whole)


def test_a_clock_time_before_the_start_is_on_the_traces_day() -> None:
    assert durations.parse_time("15:08", START, END) == START - 11.002
    assert durations.window("15:08", None, START, END) == (START, None)
    assert durations.parse_time("15:10", START, END) == START + 108.998


def test_a_clock_time_after_midnight_is_on_the_day_the_trace_reaches_it() -> None:
    start = datetime(2025, 6, 15, 23, 50, tzinfo=UTC).timestamp()
    end = start + 3600  # to 00:50 the next day
    assert durations.parse_time("00:30", start, end) == start + 40 * 60
    assert durations.parse_time("23:55", start, end) == start + 5 * 60
    assert durations.parse_time("23:40", start, end) == start - 600  # before it: clipped


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--from", "99:99"], "vtop: --from: '99:99' is not a time of day (00:00 to 23:59:59)"),
        (["--to", "24:00"], "vtop: --to: '24:00' is not a time of day"),
        (["--from", "15:60"], "vtop: --from: '15:60' is not a time of day"),
        (["--from", "16:00"], "vtop: --from 16:00 is after the trace ends (2025-06-15 15:23:12Z)"),
        (["--to", "15:00"], "vtop: --to 15:00 is before the trace starts (2025-06-15 15:08:11Z)"),
        (["--from", "+1e308m"], "vtop: --from: '1e308m' is not a duration"),
    ],
)
def test_a_time_that_cannot_be_is_one_line(args: list[str], said: str) -> None:
    code, err = report(*args)
    assert code == 3 and isinstance(err, str)
    assert err.startswith(said) and err.count("\n") == 1, err


def test_the_players_go_to_still_reads_minutes_and_seconds_that_are_no_time_of_day() -> None:
    """`g 5:75` in a replay is 5 min 75 s into it: no time of day, so not refused as one."""
    from vtop.ui.player import target

    assert target("5:75", START, END) == START + 375.0
    assert target("15:10", START, END) == pytest.approx(START + 108.998)  # a time of day in it
