"""`vtop --report`: statuses and exit codes, findings over a window, long traces, the schema."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.fakerules import kv_full
from tests.pageserver import Answer, PageServer, Script
from tests.tracegen import BusyEngine, busy_frames
from vtop.exits import fail_on_code
from vtop.model import Event, Frame
from vtop.report import render
from vtop.report.build import knobs_json
from vtop.report.collect import Collector
from vtop.report.document import Document
from vtop.report.run import replay_document
from vtop.trace import TraceReader
from vtop.trace.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())


def validate(doc: Document) -> None:
    """`doc` as JSON, held to the published schema."""
    conforms(json.loads(render(doc, "json")))


def conforms(loaded: object) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(loaded)


def vtop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.fixture
def engine_server() -> Iterator[tuple[PageServer, BusyEngine]]:
    import time

    engine = BusyEngine(seed=5, start=time.time())

    def page() -> Answer:
        engine.step()
        return Answer(engine.page().encode())

    script = Script({"/metrics": page, "/version": Answer(b'{"version": "0.32.0"}')})
    with PageServer(script) as srv:
        yield srv, engine


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_schema_test_can_fail() -> None:
    loaded = json.loads(render(replay_document(str(GOLDEN / "busy.vtrace")), "json"))
    del loaded["signals"]["kv_usage"]
    with pytest.raises(jsonschema.ValidationError):
        conforms(loaded)


def test_exit_codes_follow_the_monitoring_convention() -> None:
    assert [fail_on_code(s) for s in ("OK", "WARNING", "CRITICAL", "UNKNOWN")] == [0, 1, 2, 3]
    assert fail_on_code("WARNING", "critical") == 0
    assert fail_on_code("CRITICAL", "critical") == 2
    assert fail_on_code("UNKNOWN", "critical") == 3


def test_findings_fire_set_the_status_and_carry_their_advice() -> None:
    doc = replay_document(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full)
    validate(doc)
    assert doc["status"] == "CRITICAL" and doc["exit_code"] == 2
    (f,) = doc["findings"]
    assert f["rule"] == "kv-cache-full" and f["severity"] == "CRITICAL"
    assert not f["active_at_end"]  # pressure ended at poll 420 of 600
    start = doc["window"]["start_t"]
    assert start is not None
    assert 200 < f["first_t"] - start < 260 and 400 < f["last_t"] - start < 460
    (r,) = f["recommendations"]
    assert r == {
        **r,
        "knob": "gpu_memory_utilization",
        "from": 0.9,
        "to": 0.95,
        "flag": "--gpu-memory-utilization 0.95",
        "assumed": False,
    }
    assert f["evidence"][0]["name"] == "kv_usage avg 20 s"
    assert "kv-cache-full" in doc["reason"]


def test_a_window_before_the_pressure_is_ok() -> None:
    doc = replay_document(
        str(GOLDEN / "kv-pressure.vtrace"),
        findings=kv_full,
        resolve=lambda r: (r.start, (r.start or 0) + 150),
    )
    assert doc["status"] == "OK" and doc["findings"] == []
    assert 150 <= doc["window"]["polls"] <= 152


def test_long_traces_evaluate_at_a_coarser_cadence_but_count_every_poll(tmp_path: Path) -> None:
    path = tmp_path / "long.vtrace"
    with Recorder(path, interval_s=1.0) as rec:
        for f in busy_frames(1200, seed=2):
            rec.feed(f)
    full = replay_document(str(path))
    coarse = replay_document(str(path), max_evaluations=50)
    assert full["window"]["evaluations"] == 1200
    assert 50 <= coarse["window"]["evaluations"] <= 52
    assert coarse["window"]["polls"] == 1200
    assert coarse["signals"] == full["signals"]  # figures use every poll either way
    assert coarse["knobs"] == full["knobs"] and coarse["knobs"]["max_num_seqs"]["value"] == 256


def test_skipped_polls_hand_their_knobs_to_the_monitor_and_events_to_the_next_evaluation() -> None:
    """What a skipped poll says of the configuration reaches the monitor at once, and the
    document reads it from there (no copy of its own); its events go with the next
    evaluation."""
    frames = list(busy_frames(6))
    seen: list[Frame] = []

    def spy(monitor: Any) -> list[Any]:
        return []

    c = Collector(source_kind="replay", source_name="x", findings=spy)

    def feed(frame: Frame) -> list[Event]:
        seen.append(frame)
        return []

    c.monitor.feed = feed  # type: ignore[method-assign]  # a spy on what the monitor is fed
    first = frames[0].scrapes[0]
    note = Event(frames[2].t, "note", first.endpoint, "hello")
    frames[2] = Frame(frames[2].t, frames[2].scrapes, frames[2].gpu, frames[2].host, (note,))
    c.observe(frames[0])  # carries knobs, not evaluated
    assert first.knobs is not None and first.server is not None
    view = c.monitor.endpoints[first.endpoint]
    assert (view.knobs, view.server) == (dict(first.knobs), first.server)
    c.observe(frames[1])
    c.observe(frames[2])
    c.add(frames[3])
    assert len(seen) == 1 and seen[0].events == (note,)
    c.add(frames[4])
    assert seen[1].events == ()
    endpoint = c.document()["endpoints"][0]
    assert endpoint["knobs"] == knobs_json(first.knobs)
    assert endpoint["server"]["version"] == first.server.version


def test_live_report_is_valid_and_never_fewer_than_two_polls(
    engine_server: tuple[PageServer, BusyEngine],
) -> None:
    srv, _ = engine_server
    result = vtop(
        "--url", srv.url, "--report", "--format", "json", "--interval", "1", "--duration", "0.1"
    )
    # Two polls a second apart: too little for any rule to speak, so no all-clear either.
    assert result.returncode == 3, result.stderr
    doc = json.loads(result.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["status"] == "UNKNOWN" and "too short to rule anything out" in doc["reason"]
    # two at least; a third when the first answers fast enough for the warm-up's quick polls
    assert 2 <= doc["window"]["polls"] <= 3
    assert doc["signals"]["generation_tokens_per_s"]["avg"] > 0
    assert doc["source"] == {"kind": "live", "name": srv.url}


def test_unreachable_is_unknown_with_one_line_on_stderr() -> None:
    result = vtop(
        "--url",
        "http://127.0.0.1:1",
        "--report",
        "--duration",
        "0.3",
        "--interval",
        "0.1",
        "--format",
        "json",
    )
    assert result.returncode == 3
    assert json.loads(result.stdout)["status"] == "UNKNOWN"
    assert result.stderr == "vtop: nothing listens at http://127.0.0.1:1: connection refused\n"


def test_a_page_without_vllm_metrics_is_unknown() -> None:
    script = Script({"/metrics": Answer(b"process_cpu_seconds_total 12.5\n")})
    with PageServer(script) as srv:
        result = vtop("--url", srv.url, "--report", "--duration", "0.2", "--interval", "0.1")
    assert result.returncode == 3 and "no vllm: series" in result.stderr
    assert result.stdout.startswith("vtop report: UNKNOWN")


def test_an_unreadable_trace_is_unknown(tmp_path: Path) -> None:
    bad = tmp_path / "bad.vtrace"
    bad.write_bytes(b"not a trace at all")
    result = vtop("--replay", str(bad), "--report")
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr == f"vtop: {bad} is not a vtop trace\n"


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--replay", "x.vtrace"], "add --report", 2),
        (["--url", "http://h", "--report", "--from", "+1m"], "use them with --replay", 3),
        (["--url", "http://h", "--report", "--duration", "soon"], "is not a duration", 3),
        (
            ["--replay", "tests/golden/busy.vtrace", "--report", "--from", "yesterday"],
            "not a time",
            3,
        ),
        (
            ["--replay", "tests/golden/busy.vtrace", "--report", "--from=-1m", "--to", "+1m"],
            "--to is before --from",
            3,
        ),
    ],
)
def test_usage_errors_are_one_line(args: list[str], message: str, code: int) -> None:
    """One line; under --report UNKNOWN (3), never CRITICAL's 2 (vtop/cli/exits.py)."""
    result = vtop(*args)
    assert result.returncode == code and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_from_and_to_select_part_of_a_trace() -> None:
    result = vtop(
        "--replay",
        str(GOLDEN / "busy.vtrace"),
        "--report",
        "--format",
        "json",
        "--from",
        "+2m",
        "--to=-5m",
    )
    doc = json.loads(result.stdout)
    assert 170 <= doc["window"]["polls"] <= 182  # 600 polls: from 120 s to 600 - 300 s


def test_fail_on_critical_lets_a_warning_pass(tmp_path: Path) -> None:
    doc = replay_document(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full)
    assert fail_on_code(doc["status"], "critical") == 2
    assert fail_on_code("WARNING", "critical") == 0


def test_no_secret_reaches_a_report_or_a_trace(
    engine_server: tuple[PageServer, BusyEngine], tmp_path: Path
) -> None:
    import os

    srv, _ = engine_server
    env = {**os.environ, "VTOP_API_KEY": "sk-topsecret-4242"}
    outputs = []
    for i, fmt in enumerate(("text", "markdown", "json", "html")):
        trace = tmp_path / f"s{i}.vtrace"
        result = vtop(
            "--url",
            srv.url.replace("http://", "http://user:pw@"),
            "--header",
            "X-Api-Key: hunter2",
            "--report",
            "--format",
            fmt,
            "--record",
            str(trace),
            "--duration",
            "0.4",
            "--interval",
            "0.2",
            env=env,
        )
        # 0.4 s of a busy engine is a report like any other (its verdict may be UNKNOWN:
        # a rule whose condition holds needs more evidence), never a crash
        assert result.returncode in (0, 1, 2, 3) and "Traceback" not in result.stderr, result.stderr
        outputs += [result.stdout, result.stderr, trace.read_bytes().decode("latin-1")]
    requests = srv  # the secrets did reach the server, where they belong
    assert requests.script.requests[-1][1].get("X-Api-Key") == "hunter2"
    for text in outputs:
        for secret in ("sk-topsecret-4242", "hunter2", ":pw@"):
            assert secret not in text


def test_recorded_then_replayed_gives_the_live_numbers(
    engine_server: tuple[PageServer, BusyEngine], tmp_path: Path
) -> None:
    srv, _ = engine_server
    trace = tmp_path / "rt.vtrace"
    live = vtop(
        "--url",
        srv.url,
        "--report",
        "--format",
        "json",
        "--record",
        str(trace),
        "--duration",
        "3",
        "--interval",
        "0.1",
    )
    replay = vtop("--replay", str(trace), "--report", "--format", "json")
    a, b = json.loads(live.stdout), json.loads(replay.stdout)
    assert live.returncode == a["exit_code"] and replay.returncode == b["exit_code"], live.stderr
    assert a["status"] == b["status"] and a["reason"] == b["reason"]
    assert a["window"]["polls"] == b["window"]["polls"] >= 20
    assert a["knobs"] == b["knobs"]
    for name, sig in a["signals"].items():
        for stat in ("avg", "max", "last"):
            assert b["signals"][name][stat] == pytest.approx(sig[stat], rel=1e-6, abs=1e-6), name
    for name, lat in a["latency"].items():
        assert b["latency"][name] == pytest.approx(lat, rel=1e-6, abs=1e-6), name
    assert [f["rule"] for f in a["findings"]] == [f["rule"] for f in b["findings"]]
    assert [f["summary"] for f in a["findings"]] == [f["summary"] for f in b["findings"]]
    assert b["source"]["kind"] == "replay"


def test_headless_modes_never_load_textual() -> None:
    code = (
        "import sys\n"
        "from vtop.cli import main\n"
        "main(['--replay', 'tests/golden/busy.vtrace', '--report', '--format', 'html',"
        " '-o', '/dev/null'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stderr


def test_finding_marks_are_where_findings_begin_firing() -> None:
    from vtop.report.run import finding_marks

    marks = finding_marks(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full)
    doc = replay_document(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full)
    assert marks == [(doc["findings"][0]["first_t"], "CRITICAL kv-cache-full")]
    assert finding_marks(str(GOLDEN / "busy.vtrace"), findings=kv_full) == []


def _rounded(value: Any) -> Any:
    """`value` with every float to six significant digits: a trace keeps poll times to the
    microsecond, so a prediction fitted on a replay may differ from the live one in the ninth."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _cut_short(finding: dict[str, Any]) -> bool:
    search = (finding.get("prediction") or {}).get("search") or {}
    cut = bool(search.get("cut_short"))
    assert cut == ("cut short by the report's time budget" in search.get("note", "")), search
    return cut


def test_simulator_recorded_and_replayed_gives_the_same_signals_and_findings(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "sim.vtrace"
    live = vtop(
        "--demo",
        "budget-too-small",
        "--report",
        "--format",
        "json",
        "--record",
        str(trace),
        "--duration",
        "4m",
    )
    assert live.returncode in (0, 1, 2), live.stderr
    replay = vtop("--replay", str(trace), "--report", "--format", "json")
    a, b = json.loads(live.stdout), json.loads(replay.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(a)
    assert a["source"] == {"kind": "demo", "name": "budget-too-small"}
    # four minutes at one poll a second and the first 15 s at four a second (the warm-up)
    assert a["window"]["polls"] == b["window"]["polls"] and 284 <= a["window"]["polls"] <= 286
    assert a["knobs"] == b["knobs"] and a["knobs"]["max_num_seqs"]["value"] == 16
    for name, sig in a["signals"].items():
        for stat in ("avg", "max", "last"):
            assert b["signals"][name][stat] == pytest.approx(sig[stat], rel=1e-6, abs=1e-6), name
    for name, lat in a["latency"].items():
        assert b["latency"][name] == pytest.approx(lat, rel=1e-6, abs=1e-6), name
    assert a["status"] == b["status"]
    assert len(a["findings"]) == len(b["findings"])
    for fa, fb in zip(a["findings"], b["findings"], strict=True):
        times = ("first_t", "last_t", "suppressed_since_t")  # a trace stores times as floats
        # A search the report's time budget cut short (a busy host) chose among fewer
        # configurations: its figures are the host's, not the trace's, and the report says so.
        busy = ("prediction", "recommendations") if _cut_short(fa) or _cut_short(fb) else ()
        assert _rounded({k: v for k, v in fa.items() if k not in times + busy}) == _rounded(
            {k: v for k, v in fb.items() if k not in times + busy}
        )
        assert [r["knob"] for r in fa["recommendations"]] == [
            r["knob"] for r in fb["recommendations"]
        ]
        assert [fb[k] or 0 for k in times] == pytest.approx([fa[k] or 0 for k in times], abs=1e-6)
        assert (fa["suppressed_since_t"] is None) == (fb["suppressed_since_t"] is None)
    with TraceReader(trace) as r:
        assert r.header.sources == ["demo budget-too-small (seed 0)"]


def test_a_demo_recording_with_a_duration_runs_flat_out(tmp_path: Path) -> None:
    import time

    trace = tmp_path / "demo.vtrace"
    started = time.monotonic()
    result = vtop("--demo", "healthy", "--record", str(trace), "--duration", "10m")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60  # ten simulated minutes, not ten real ones
    assert "of simulated time" in result.stderr
    with TraceReader(trace) as r:
        # one poll a second for ten minutes, and four a second for the first 15 s (the
        # warm-up: the simulated server answers at once): 601 + 45, the sim's answer delays
        # moving a poll across the warm-up's end at most
        assert 644 <= r.stats().polls <= 646 and r.indexed and r.start is not None
        first = [p.t for p in r.polls(r.start, r.start + 10.0)]
        gaps = [b - a for a, b in itertools.pairwise(first)]
        assert len(gaps) >= 38 and all(0.25 <= g < 0.26 for g in gaps), gaps


def test_two_endpoints_one_down_is_a_warning_and_both_are_described() -> None:
    from dataclasses import replace

    from vtop.model import Scrape

    c = Collector(source_kind="live", source_name="a b", findings=lambda m: [])
    for f in busy_frames(40, seed=6):
        down = Scrape("http://b:8000", f.t, 0.8, error="cannot connect to http://b:8000/metrics")
        c.add(replace(f, scrapes=(*f.scrapes, down)))
    doc = c.document()
    validate(doc)
    assert doc["status"] == "WARNING" and "http://b:8000 could not be read" in doc["reason"]
    a, b = doc["endpoints"]
    assert (a["status"], b["status"]) == ("ok", "unreachable")
    assert b["failed_polls"] == 40 and b["signals"]["running"]["avg"] is None
    assert doc["endpoint"] == a["url"] and doc["signals"] == a["signals"]
    text = render(doc, "text")
    assert "signals of http://b:8000" in text and "unreachable: 40 polls, 40 failed" in text
