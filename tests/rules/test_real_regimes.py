"""The 30 s report on the real vLLM server, replayed from its recordings: the right verdict, soon.

tests/fixtures/real-regimes/ holds what `vtop --url … --record` saw of the real vLLM CPU server
in each regime, loaded for 15 s before vtop attached (its README names the rule that must name
each, or none). Each trace's first 30 s are reported as `vtop --report --duration 30` would
have reported them live (the same polls, replayed through the same collector): a sick server
gets its root cause with its advice, at WARNING or CRITICAL, within 15 s (waves: 30 s), and
nothing else counts; a server that is fine comes out OK, with no warning still being judged;
a borderline one (its rule marked "(pending)") comes out UNKNOWN with that rule still pending.
The live version of this (tests/integration/test_triage_real_server.py) needs the server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.report.document import Document
from vtop.report.run import replay_document
from vtop.trace.reader import TraceReader

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "real-regimes"
REPORT_S = 30.0
WITHIN_S = {
    "client-static-batching": 30.0,
    # 32 curl processes refill their requests a moment after each finishes, nearly in step:
    # four polls a second see the queue dip to half the cap every few seconds, one a second
    # (from 15 s) rarely
    "plain-curl.vtrace": 20.0,
}
"""Seconds into the report by which the verdict must have come, by trace or by rule (15 s
unless named here)."""


PENDING = " (pending)"
"""A rule cell ending so: borderline evidence, which a 30 s report must leave UNKNOWN (exit 3)
with that rule pending, never OK and never another verdict."""


def regimes() -> list[tuple[str, str | None]]:
    rows = []
    for line in (HERE / "README.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.split("|")[1:-1]]
        if len(cells) >= 2 and cells[0].endswith(".vtrace"):
            rows.append((cells[0], None if cells[1] == "none" else cells[1]))
    return rows


def test_the_table_names_every_trace() -> None:
    assert sorted(t for t, _ in regimes()) == sorted(p.name for p in HERE.glob("*.vtrace"))


def report(trace: str) -> Document:
    path = HERE / trace
    with TraceReader(path) as reader:
        start = reader.start
    assert start is not None
    return replay_document(str(path), start=start, end=start + REPORT_S)


@pytest.mark.parametrize(("trace", "rule"), regimes())
def test_a_30_s_report_names_the_right_cause_soon(trace: str, rule: str | None) -> None:
    doc = report(trace)
    said = f"{doc['status']}: {doc['reason']}"
    counted = [f for f in doc["findings"] if f["counts"]]
    if rule is None:
        assert doc["status"] == "OK" and doc["exit_code"] == 0, said
        assert not [f for f in counted if f["severity"] in ("WARNING", "CRITICAL")], said
        return
    if rule.endswith(PENDING):
        assert doc["status"] == "UNKNOWN" and doc["exit_code"] == 3, said
        assert not counted, said
        pending = [f["rule"] for f in doc["findings"] if f["state"] == "pending"]
        assert pending[:1] == [rule.removesuffix(PENDING)], said
        return
    assert doc["status"] in ("WARNING", "CRITICAL"), said
    assert [f["rule"] for f in counted] == [rule], said
    top = counted[0]
    began = doc["window"]["start_t"]
    assert began is not None, said
    took = top["first_t"] - began
    assert took <= WITHIN_S.get(trace, WITHIN_S.get(rule, 15.0)), (took, said)
    if rule in ("memory-ceiling", "budget-too-small"):
        assert top["recommendations"], top  # a verdict comes with its flag
    if rule == "frontend-bound":
        # vLLM's CPU build holds every core of this host: no second API server process (it
        # made 10 % fewer tokens/s), more cores, and the summary says so
        assert not top["recommendations"], top
        assert "more cores, not more API server processes" in top["summary"], top
    raises = [
        r
        for f in doc["findings"]
        for r in f["recommendations"]
        if r["knob"] == "max_num_seqs" and r["direction"] == "raise"
    ]
    if rule == "memory-ceiling":  # a wider batch only beside the FP8 KV cache that makes room
        fp8 = any(
            r["knob"] == "kv_cache_dtype" and str(r["to"]).startswith("fp8")
            for r in top["recommendations"]
        )
        assert not raises or fp8, raises
    if rule == "budget-too-small":
        assert raises, said
        for r in raises:
            was, to = r["from"], r["to"]
            assert isinstance(was, int) and isinstance(to, int) and to > was, raises
