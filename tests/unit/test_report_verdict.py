"""The report's verdict: each finding's state at the end of the window, and what sets the status.

A report must never contradict the live engine: a symptom that fired and was then explained by
its root cause is reported as explained (by which rule, since when), gives no advice, and does
not lead the headline; the cause does. The first tests script the engine's findings poll by
poll over frames of a synthesised busy server; the last run the shipped rules on the simulator,
in process (to compare with the engine) and through the command line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema

from tests.tracegen import busy_frames
from vtop.model import Finding, FindingState, Recommendation, Severity
from vtop.monitor import Monitor
from vtop.report import render
from vtop.report.collect import Collector, monitor_findings
from vtop.report.document import Document, FindingDoc
from vtop.sources.sim import SimSource
from vtop.triage.engine import Engine, lacking

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())
FRAMES = list(busy_frames(40, seed=3))
EP = FRAMES[0].scrapes[0].endpoint
Script = Callable[[int], list[Finding]]


def finding(rule: str, state: FindingState = "firing", severity: Severity = Severity.WARNING,
            by: str | None = None) -> Finding:  # fmt: skip
    rec = Recommendation("max_num_seqs", None, 64, "raise", "demand", {})
    return Finding(
        rule=rule, title=rule, endpoint=EP, severity=severity, state=state,
        summary=f"{rule} says so", recommendations=() if by else (rec,), suppressed_by=by,
    )  # fmt: skip


def collect(script: Script) -> Document:
    """A report over FRAMES where poll i's findings are `script(i)`, the engine's order."""
    polls = iter(range(len(FRAMES)))
    current: list[Finding] = []

    def findings(_: Monitor) -> list[Finding]:
        return current

    c = Collector(source_kind="replay", source_name="scripted", findings=findings)
    for frame in FRAMES:
        current[:] = script(next(polls))
        c.add(frame)
    doc = c.document()
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(render(doc, "json")))
    return doc


def by_rule(doc: Document) -> dict[str, FindingDoc]:
    return {f["rule"]: f for f in doc["findings"]}


def symptom_then_cause(i: int) -> list[Finding]:
    """The symptom fires from poll 5; its cause, slower to speak, fires from poll 15 on."""
    if i < 5:
        return []
    if i < 15:
        return [finding("symptom")]
    return [finding("cause"), finding("symptom", "suppressed", by="cause")]


def test_a_symptom_explained_at_the_end_is_reported_as_explained_and_not_as_the_verdict() -> None:
    doc = collect(symptom_then_cause)
    assert doc["status"] == "WARNING" and doc["exit_code"] == 1
    assert doc["reason"].startswith(f"cause on {EP}: cause says so")
    assert doc["reason"].endswith("(explains symptom)")
    assert [f["rule"] for f in doc["findings"]] == ["cause", "symptom"]
    symptom = by_rule(doc)["symptom"]
    assert symptom["state"] == "suppressed" and symptom["suppressed_by"] == "cause"
    assert symptom["suppressed_since_t"] == FRAMES[15].t
    assert symptom["active_at_end"] and not symptom["counts"]
    assert symptom["recommendations"] == []  # the engine gives none while it is explained
    assert symptom["first_t"] == FRAMES[5].t  # it still says when it was first seen
    assert by_rule(doc)["cause"]["counts"]
    text = render(doc, "text")
    assert "symptom  from" in text and "explained by cause from" in text
    assert text.count("still firing at the end") == 1  # the cause's, not the symptom's
    assert "explained by `cause`" not in render(doc, "markdown")  # folded into the span


def test_a_symptom_that_fired_alone_counts_even_if_a_cause_explains_it_later() -> None:
    def script(i: int) -> list[Finding]:
        if 5 <= i < 10:  # an episode of its own, over before the cause appears
            return [finding("symptom", severity=Severity.CRITICAL)]
        if i >= 20:
            return [finding("cause"), finding("symptom", "suppressed", by="cause")]
        return []

    doc = collect(script)
    assert doc["status"] == "CRITICAL"
    assert doc["reason"].startswith(f"symptom on {EP}")
    assert by_rule(doc)["symptom"]["counts"]


def test_a_symptom_that_fired_before_its_cause_does_not_set_the_status() -> None:
    def script(i: int) -> list[Finding]:
        if i < 5:
            return [finding("symptom", severity=Severity.CRITICAL)]
        return [finding("cause"), finding("symptom", "suppressed", Severity.CRITICAL, "cause")]

    doc = collect(script)
    assert doc["status"] == "WARNING"  # the cause's severity, not the explained symptom's
    assert by_rule(doc)["symptom"]["severity"] == "CRITICAL"  # still the worst it reached


def test_a_symptom_still_firing_after_its_cause_cleared_counts_again() -> None:
    def script(i: int) -> list[Finding]:
        if i < 10:
            return [finding("cause"), finding("symptom", "suppressed", by="cause")]
        return [finding("symptom")]

    doc = collect(script)
    symptom = by_rule(doc)["symptom"]
    assert symptom["state"] == "firing" and symptom["suppressed_by"] is None
    assert symptom["counts"] and symptom["recommendations"]
    assert doc["reason"].startswith(f"symptom on {EP}")  # firing at the end leads
    assert not by_rule(doc)["cause"]["active_at_end"]


def test_an_info_finding_is_named_in_an_ok_headline() -> None:
    doc = collect(lambda i: [finding("underloaded", severity=Severity.INFO)] if i > 3 else [])
    assert doc["status"] == "OK" and doc["exit_code"] == 0
    assert doc["reason"].startswith(f"1 info: underloaded on {EP}: underloaded says so")
    assert "no findings" not in doc["reason"]
    infos = [
        finding("underloaded", severity=Severity.INFO),
        finding("prefix-cache-ineffective", severity=Severity.INFO),
    ]
    two = collect(lambda i: infos)
    assert two["reason"].startswith("2 info: underloaded, prefix-cache-ineffective (")
    assert collect(lambda i: [])["reason"].startswith("no findings over")


def test_on_the_simulator_the_report_says_what_the_engine_says_at_the_end() -> None:
    source = SimSource.scenario("budget-too-small", seed=0, in_thread=False)
    monitor = Monitor(engine=Engine.from_catalog(user=False))
    c = Collector(source_kind="demo", source_name="budget-too-small", monitor=monitor)
    for _ in range(301):
        c.add(source.poll_now())
    doc = c.document()
    live = {f.rule: f for f in monitor_findings(monitor) if f.state in ("firing", "suppressed")}
    at_end = {f["rule"]: f for f in doc["findings"] if f["active_at_end"]}
    assert set(at_end) == set(live)
    for rule, f in at_end.items():
        engine = live[rule]
        assert (f["state"], f["suppressed_by"], f["summary"]) == (
            engine.state, engine.suppressed_by, engine.summary
        ), rule  # fmt: skip
        assert [r["flag"] for r in f["recommendations"]] == [r.flag for r in engine.recommendations]
    assert at_end["ttft-queueing"]["state"] == "suppressed"
    assert doc["reason"].startswith("budget-too-small on ")


def test_the_demo_report_leads_with_the_root_cause() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "--demo", "budget-too-small", "--report", "--format",
         "json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["status"] == "WARNING"
    assert doc["reason"].startswith("budget-too-small on sim://budget-too-small: ")
    assert "explains ttft-queueing" in doc["reason"]
    first, *rest = doc["findings"]
    assert first["rule"] == "budget-too-small" and first["state"] == "firing"
    (ttft,) = [f for f in rest if f["rule"] == "ttft-queueing"]
    assert ttft["state"] == "suppressed" and ttft["suppressed_by"] == "budget-too-small"
    assert ttft["active_at_end"] and not ttft["counts"] and ttft["recommendations"] == []
    assert ttft["suppressed_since_t"] >= first["first_t"]


def accruing(rule: str, severity: Severity = Severity.WARNING, needs: float | None = 15.0,
             held: float = 30.0) -> Finding:  # fmt: skip
    """A rule whose condition holds while its evidence accrues (no advice, as the engine)."""
    f = Finding(
        rule=rule, title=rule, endpoint=EP, severity=severity,
        state="pending" if needs is not None else "insufficient",
        summary=rule, held_s=held, for_s=held + (needs or 0.0), needs_s=needs,
    )  # fmt: skip
    return f if needs is not None else lacking(f, ["7 of 20 finished requests"])


def test_a_warning_still_being_judged_at_the_end_is_unknown_never_ok() -> None:
    last = len(FRAMES) - 1
    doc = collect(lambda i: [accruing("budget-too-small")] if i == last else [])
    assert doc["status"] == "UNKNOWN" and doc["exit_code"] == 3
    assert doc["reason"].startswith(f"no verdict yet: budget-too-small on {EP}: held for ")
    assert doc["reason"].endswith("; needs 15 s more")
    (f,) = doc["findings"]
    assert (f["state"], f["held_s"], f["needs_s"], f["counts"]) == ("pending", 30.0, 15.0, False)
    assert f["recommendations"] == [] and f["active_at_end"] and f["missing"] == []
    text = render(doc, "text")
    assert "no verdict yet: holding from" in text and "needs 15 s more" in text
    assert "no verdict yet" in render(doc, "markdown") and "no verdict yet" in render(doc, "html")


def test_one_that_waits_for_requests_says_what_it_waits_for() -> None:
    last = len(FRAMES) - 1
    doc = collect(lambda i: [accruing("ttft-queueing", needs=None)] if i == last else [])
    assert doc["status"] == "UNKNOWN"
    assert doc["reason"].endswith("not enough data yet: 7 of 20 finished requests")
    (f,) = doc["findings"]
    assert f["state"] == "insufficient" and f["needs_s"] is None
    assert f["missing"] == ["7 of 20 finished requests"]  # the fact, for scripts
    assert "not enough data yet: 7 of 20 finished requests" in render(doc, "text")
    assert "not enough data yet: 7 of 20 finished requests" in render(doc, "markdown")


def test_a_verdict_wins_over_a_rule_still_judged_and_info_never_makes_it_unknown() -> None:
    last = len(FRAMES) - 1
    doc = collect(lambda i: [finding("memory-ceiling"), accruing("ttft-queueing")])
    assert doc["status"] == "WARNING"
    assert [f["state"] for f in doc["findings"]] == ["firing", "pending"]  # listed, not counted
    info = collect(lambda i: [accruing("underloaded", Severity.INFO)] if i == last else [])
    assert info["status"] == "OK" and info["findings"] == []
    quiet = collect(lambda i: [accruing("budget-too-small")] if i == last - 5 else [])
    assert quiet["status"] == "OK", "a condition that held once and stopped is no reason"


def test_the_demo_starts_in_trouble_and_a_20_s_report_names_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "--demo", "--report", "--duration", "20s",
         "--format", "json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    doc = json.loads(result.stdout)
    assert doc["status"] == "WARNING" and result.returncode == 1, doc["reason"]
    assert doc["reason"].startswith("budget-too-small on sim://budget-too-small")
    top = next(f for f in doc["findings"] if f["counts"])
    assert [r["flag"] for r in top["recommendations"]] == ["--max-num-seqs 64"]
