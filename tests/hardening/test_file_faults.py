"""Broken files met where a user meets them: rule directories, damaged traces, a full disk.

The unit tests prove the loader's errors (tests/unit/test_triage_loader.py), the reader's
handling of damage (test_trace_file.py) and the recorder's on a file-size limit
(test_trace_recorder.py). These prove what the user then gets from each command that reads
or writes such a file: `--once`, `--report` (live, simulated, replayed), the dashboard and the
replay screen, `vtop trace info`, a recording from the dashboard and a headless one. For each:
no traceback, exactly one line per fault that names the file and where in it (line and rule
id, byte offset, format version), everything readable still used (the other rules run, the
polls around the damage are replayed, the polls recorded before the disk filled replay), and
the command still doing its job (the monitor keeps polling, the report is printed).
"""

from __future__ import annotations

import gzip
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.localfaults import (
    SHIPPED_TRACE,
    FullDisk,
    full_disk,
    notifications,
    one_line,
    polls,
    quota_write,
    records,
    run_cli_tui,
    stderr_lines,
    until,
    vtop,
)
from vtop import cli
from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin
from vtop.trace import wire
from vtop.trace.reader import TraceReader

TRACE_POLLS = 901
"""Polls in the shipped trace the damaged ones are made from (keyframes every 300)."""

# -- rules ---------------------------------------------------------------------------------------

RULE_FILES = {
    "a-syntax.yaml": """\
id: broken-syntax
title: [Broken syntax
severity: warning
summary: s
when: {last: running, above: 1}
""",
    "b-signal.yaml": """\
id: bad-signal
title: Bad signal
severity: warning
summary: s
when:
  last: runnning
  above: 1
""",
    "c-type.yaml": """\
id: wrong-type
title: Wrong type
severity: warning
order: high
summary: s
when: {last: running, above: 1}
""",
    "d-missing.yaml": """\
id: no-summary
title: Missing summary
severity: warning
when: {last: running, above: 1}
""",
    # A good rule and a bad one in one file: the good one must not pay for its neighbour.
    "e-mixed.yaml": """\
rules:
  - id: always-watching
    title: Always watching
    severity: warning
    requires: {evidence: 0s}
    when: {last: running, above: -1}
    values:
      now: {max_over_time: running, window: 1m}
    summary: "{now:.0f} running: the user's own rule runs"
  - id: bad-knob
    title: Bad knob
    severity: info
    summary: s
    when: {last: waiting, above: 0}
    recommend:
      - {knob: max_num_seq, direction: raise, value: 2}
""",
}


def rule_errors(rules: Path) -> list[str]:
    """What each broken rule must say: file:line: rule-id: what, in one line each."""
    return [
        f"{rules}/a-syntax.yaml:3: broken-syntax: invalid YAML: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence from line 2)",
        f"{rules}/b-signal.yaml:6: bad-signal: unknown signal 'runnning' "
        "(see rules/README.md for the list)",
        f"{rules}/c-type.yaml:4: wrong-type: order must be a whole number",
        f"{rules}/d-missing.yaml:1: no-summary: missing 'summary'",
        f"{rules}/e-mixed.yaml:16: bad-knob: recommend: unknown knob 'max_num_seq'",
    ]


@pytest.fixture
def rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `--rules` directory with four broken files and a half-broken one."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user rules of ours
    directory = tmp_path / "my-rules"
    directory.mkdir()
    for name, text in RULE_FILES.items():
        (directory / name).write_text(text)
    return directory


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with serve(Twin("budget-too-small")) as server:
        yield server


def fired(findings: list[dict[str, Any]]) -> set[str]:
    return {f["rule"] for f in findings if f["state"] in ("firing", "suppressed")}


def test_broken_rules_are_named_once_and_the_others_run_headless(
    rules: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    skipped = [f"vtop: rule skipped: {line}" for line in rule_errors(rules)]

    result = vtop("--url", sim.url, "--once", "--interval", "0.2", "--rules", str(rules))
    assert result.returncode == 0
    assert stderr_lines(result.stderr) == skipped
    (ep,) = json.loads(result.stdout)["endpoints"]
    assert ep["status"] == "ok" and ep["polls"] == 2
    (mine,) = [f for f in ep["findings"] if f["rule"] == "always-watching"]
    assert mine["state"] == "firing"
    assert mine["summary"].endswith("running: the user's own rule runs")

    result = vtop(
        "--url",
        sim.url,
        "--report",
        "--duration",
        "1s",
        "--interval",
        "0.2",
        "--format",
        "json",
        "--rules",
        str(rules),
    )
    assert stderr_lines(result.stderr) == skipped
    doc = json.loads(result.stdout)
    assert result.returncode == doc["exit_code"] == 1  # the user's rule is a warning
    assert "always-watching" in fired(doc["findings"])

    # A replayed report runs today's rules, the user's included, over the recorded polls.
    code = cli.main(
        ["--replay", str(SHIPPED_TRACE), "--report", "--format", "json", "--rules", str(rules)]
    )
    out, err = capsys.readouterr()
    assert stderr_lines(err) == skipped
    doc = json.loads(out)
    assert code == doc["exit_code"] == 1
    assert {"always-watching", "budget-too-small"} <= fired(doc["findings"])
    assert doc["window"]["polls"] == TRACE_POLLS


def test_broken_rules_are_shown_on_the_dashboard_which_keeps_going(
    rules: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    async def drive(app: Any, pilot: Any) -> None:
        await until(pilot, lambda: app.monitor.frames >= 3, what="three polls")
        seen["toasts"] = [(n.title, str(n.message)) for n in app._notifications]
        seen["firing"] = [
            line.finding.rule
            for line in app.triage.lines
            if line.kind == "firing" and line.finding is not None
        ]
        frames = app.monitor.frames
        await until(pilot, lambda: app.monitor.frames >= frames + 2, what="more polls")
        seen["rules"] = {r.id for r in app.monitor.engine.rules}

    code, _ = run_cli_tui(["--url", sim.url, "--interval", "0.2", "--rules", str(rules)], drive)
    assert code == 0
    assert seen["toasts"] == [("5 rule(s) skipped; the others run", "\n".join(rule_errors(rules)))]
    assert "always-watching" in seen["firing"]
    assert {"always-watching", "memory-ceiling", "budget-too-small"} <= seen["rules"]
    broken = {"broken-syntax", "bad-signal", "wrong-type", "no-summary", "bad-knob"}
    assert not broken & seen["rules"]
    # Printed too, for the terminal the user returns to when the screen closes.
    assert stderr_lines(capsys.readouterr().err) == [
        f"vtop: rule skipped: {line}" for line in rule_errors(rules)
    ]


# -- damaged and foreign trace files --------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped() -> tuple[bytes, list[Any]]:
    data = SHIPPED_TRACE.read_bytes()
    recs = records(data)
    assert len(polls(recs)) == TRACE_POLLS
    return data, recs


@pytest.fixture(scope="module")
def damaged(
    tmp_path_factory: pytest.TempPathFactory, shipped: tuple[bytes, list[Any]]
) -> dict[str, tuple[Path, int, str]]:
    """name -> (file, the polls that must still replay, the one warning it must give)."""
    data, recs = shipped
    out = tmp_path_factory.mktemp("damaged")
    poll_recs = polls(recs)
    keys = [i for i, r in enumerate(poll_recs) if r.kind == wire.KEYFRAME]
    assert keys == [0, 300, 600, 900]

    # Killed mid-write: the file ends ten bytes into poll 351's record (no footer).
    cut = poll_recs[350].offset + 10
    truncated = out / "truncated.vtrace"
    truncated.write_bytes(data[:cut])

    # Bytes garbled inside poll 101: that deflate stream is lost up to the next keyframe
    # (poll 301); everything before and after replays.
    bad = poll_recs[100]
    garbled_data = bytearray(data)
    for i in range(bad.offset + 20, bad.offset + 30):
        garbled_data[i] ^= 0x5A
    garbled = out / "garbled.vtrace"
    garbled.write_bytes(bytes(garbled_data))
    skipped = poll_recs[keys[1]].offset - bad.offset
    return {
        "truncated": (
            truncated,
            350,
            f"truncated.vtrace: 10 damaged or truncated bytes at the "
            f"end (first at byte {poll_recs[350].offset}); replaying what precedes and "
            "follows them",
        ),
        "garbled": (
            garbled,
            100 + TRACE_POLLS - 300,
            f"garbled.vtrace: damaged record at byte {bad.offset}; skipped {skipped} bytes",
        ),
    }


@pytest.mark.parametrize("kind", ["truncated", "garbled"])
def test_a_damaged_trace_reports_what_it_holds_with_one_warning(
    kind: str, damaged: dict[str, tuple[Path, int, str]]
) -> None:
    path, survivors, warning = damaged[kind]
    with TraceReader(SHIPPED_TRACE) as reader:
        times = list(reader.times())

    result = vtop("--replay", str(path), "--report", "--format", "json")
    assert one_line(result.stderr) == f"vtop: warning: {warning}"
    doc = json.loads(result.stdout)
    assert result.returncode == doc["exit_code"]
    assert doc["window"]["polls"] == survivors
    assert doc["window"]["start_t"] == pytest.approx(times[0], abs=1e-6)
    last = times[survivors - 1] if kind == "truncated" else times[-1]  # after the damage too
    assert doc["window"]["end_t"] == pytest.approx(last, abs=1e-6)
    assert "budget-too-small" in fired(doc["findings"]), "the incident is still found"


def test_trace_info_says_where_a_trace_is_damaged(
    damaged: dict[str, tuple[Path, int, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, survivors, warning = damaged["truncated"]
    assert cli.main(["trace", "info", str(path)]) == 0
    out, err = capsys.readouterr()
    assert one_line(err) == f"vtop: warning: {warning}"
    assert f"({survivors} polls, every 1.00 s)" in out
    assert "rebuilt by scanning (the recording did not close cleanly)" in out

    # The footer of the garbled one is intact, so its totals alone would hide the damage.
    path, _, _ = damaged["garbled"]
    data, recs = SHIPPED_TRACE.read_bytes(), records(SHIPPED_TRACE.read_bytes())
    bad = polls(recs)[100]
    end = polls(recs)[300].offset
    assert cli.main(["trace", "info", str(path)]) == 0
    out, err = capsys.readouterr()
    assert one_line(err) == (
        f"vtop: warning: garbled.vtrace: {end - bad.offset} damaged or truncated bytes in "
        f"1 place(s) (first at byte {bad.offset}); replaying what precedes and follows them"
    )
    assert "footer (closed cleanly)" in out and len(data) == path.stat().st_size


@pytest.mark.parametrize("kind", ["truncated", "garbled"])
def test_the_replay_screen_plays_a_damaged_trace_and_says_where_once(
    kind: str, damaged: dict[str, tuple[Path, int, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, survivors, warning = damaged[kind]
    seen: dict[str, Any] = {}

    async def drive(app: Any, pilot: Any) -> None:
        await until(
            pilot,
            lambda: app.replay.at_end and app.findings_timeline.complete,
            timeout=60,
            what="the end of the trace and of the pass over it",
        )
        await pilot.pause()
        seen["warnings"] = [m for m in notifications(app) if "byte" in m]
        seen["frames"] = app.monitor.frames
        seen["screen"] = app.triage.lines[0].text

    code, app = run_cli_tui(["--replay", str(path), "--speed", "1000"], drive)
    assert code == 0 and app is not None
    assert seen["warnings"] == [warning]
    assert seen["frames"] == survivors
    assert seen["screen"].startswith("budget-too-small: Budget too small"), seen["screen"]
    assert capsys.readouterr().err == "", "nothing written under the screen"


def _newer(data: bytes) -> bytes:
    head = bytearray(data)
    struct.pack_into("<H", head, 8, 9)
    return bytes(head)


def _no_header(data: bytes) -> bytes:
    broken = bytearray(data)
    broken[wire.PREAMBLE.size + wire.RECORD.size + 5] ^= 0xFF  # inside the header's JSON
    return bytes(broken)


UNUSABLE = {
    "newer": (
        _newer,
        "{p} uses trace format 9, newer than this vtop reads (1); upgrade vtop to replay it",
    ),
    "empty": (lambda d: b"", "{p} is not a vtop trace (too short)"),
    "notes": (lambda d: b"# what I saw at 3 am\n" * 20, "{p} is not a vtop trace"),
    "gzipped": (gzip.compress, "{p} is not a vtop trace"),
    "no-header": (_no_header, "{p} has no readable header; it is not a usable trace"),
    "missing": (None, "cannot open {p}: No such file or directory"),
    "directory": (
        None,
        "{p} is a directory, not a regular file; a trace is a file written by vtop --record",
    ),
}


@pytest.mark.parametrize("kind", list(UNUSABLE))
def test_a_file_that_is_not_a_usable_trace_is_one_line_and_unknown(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, expected = UNUSABLE[kind]
    path = tmp_path / f"{kind}.vtrace"
    if make is not None:
        path.write_bytes(make(SHIPPED_TRACE.read_bytes()))
    elif kind == "directory":
        path.mkdir()
    line = "vtop: " + expected.format(p=path)

    for argv in (["--replay", str(path), "--report"], ["trace", "info", str(path)]):
        assert cli.main(argv) == 3, argv
        out, err = capsys.readouterr()
        assert (out, one_line(err)) == ("", line), argv

    # The replay screen refuses it before taking the terminal over.
    code, app = run_cli_tui(["--replay", str(path)], _never)
    assert (code, app) == (3, None)
    assert one_line(capsys.readouterr().err) == line


async def _never(app: Any, pilot: Any) -> None:
    raise AssertionError("the screen opened")


# -- a full disk while recording ----------------------------------------------------------------

FREE = 3 * 4096
"""Room for the header and the first polls only (a demo's first second takes about 4.6 kB:
at one block, a page a few bytes longer left room for no poll at all)."""


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[FullDisk]:
    with full_disk(tmp_path, FREE) as d:
        yield d


def test_a_full_disk_stops_a_headless_recording_not_the_report(disk: FullDisk) -> None:
    path = disk.dir / "incident.vtrace"
    result = vtop(
        "--demo",
        "--report",
        "--record",
        str(path),
        "--duration",
        "10m",
        "--format",
        "json",
        quota=disk,
    )
    line = one_line(result.stderr)
    assert line.startswith("vtop: recording stopped after ")
    assert line.endswith(
        f" polls: cannot write {path}: No space left on device (the trace "
        "holds every poll before); monitoring continues"
    )
    recorded = int(line.split("recording stopped after ")[1].split()[0])
    doc = json.loads(result.stdout)
    assert result.returncode == doc["exit_code"]
    # ten minutes at one poll a second, the first 15 s at four (the warm-up): 601 + 45 polls,
    # the simulator's answer delays moving one across the warm-up's end at most
    polls = doc["window"]["polls"]
    assert 644 <= polls <= 646 and polls > recorded > 0, "the report covers the whole window"
    assert "budget-too-small" in fired(doc["findings"])
    with TraceReader(path, warn=pytest.fail) as reader:  # replays without a warning
        assert sum(1 for _ in reader.frames()) == recorded
    assert path.stat().st_size <= FREE


def test_a_full_disk_stops_the_dashboards_recording_and_monitoring_goes_on(
    disk: FullDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(disk.dir)  # `r` records into the working directory
    if not disk.real:
        monkeypatch.setattr(os, "write", quota_write(str(disk.dir), disk.free))
    seen: dict[str, Any] = {}

    async def drive(app: Any, pilot: Any) -> None:
        await until(pilot, lambda: app.monitor.frames >= 2, what="two polls")
        await pilot.press("r")
        assert app.recorder is not None and app.header.text("cadence").startswith("⏺ rec")
        await until(pilot, lambda: app.recorder.error is not None, what="the disk to fill")
        seen["stopped_at"] = app.monitor.frames
        seen["error"] = app.recorder.error
        seen["path"] = app.recorder.path
        seen["polls"] = app.recorder.polls
        await until(
            pilot,
            lambda: app.monitor.frames >= seen["stopped_at"] + 3,
            what="polls after the disk filled",
        )
        seen["errors"] = [n for n in app._notifications if n.severity == "error"]
        seen["cadence"] = app.header.text("cadence")
        await pilot.press("q")

    code, _ = run_cli_tui(["--demo", "--interval", "0.05"], drive)
    assert code == 0
    path = seen["path"]
    expected = (
        f"recording stopped after {seen['polls']} polls: cannot write {path}: No space "
        "left on device (the trace holds every poll before)"
    )
    assert seen["error"] == expected
    assert [str(n.message) for n in seen["errors"]] == [expected]
    assert not seen["cadence"].startswith("⏺"), "the header no longer says it records"
    with TraceReader(disk.dir / path, warn=pytest.fail) as reader:
        assert sum(1 for _ in reader.frames()) == seen["polls"] > 0


# -- a full disk while writing a report ---------------------------------------------------------

OLD_REPORT = "<!doctype html><title>yesterday's report</title>\n"


@pytest.mark.parametrize("fmt", ["html", "json"])
def test_a_full_disk_while_writing_a_report_leaves_the_old_one_whole(
    tmp_path: Path, fmt: str
) -> None:
    """The report (tens of KB) meets a disk with two pages left, one of them the old report's:
    a short write, then ENOSPC. The old report stays as it was, no temporary file is left, and
    the failure is one line naming the file (exit 3: no report was delivered)."""
    with full_disk(tmp_path, 2 * 4096) as disk:
        out = disk.dir / f"report.{fmt}"
        out.write_text(OLD_REPORT)
        result = vtop(
            "--replay", str(SHIPPED_TRACE), "--report", "--format", fmt, "-o", str(out), quota=disk
        )
        assert one_line(result.stderr) == f"vtop: cannot write {out}: No space left on device"
        assert result.returncode == 3 and result.stdout == ""
        assert out.read_text() == OLD_REPORT
        assert sorted(p.name for p in disk.dir.iterdir() if p.name != ".filler") == [out.name]
