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
from vtop.whatif.predict import prepare
from vtop.whatif.watched import read_trace

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


def test_a_pinned_pool_is_advised_twice_the_blocks_beside_the_fp8_cache() -> None:
    """kv-pinned: 24 blocks pinned by --num-gpu-blocks-override, which vLLM keeps whatever the
    cache's dtype (measured: FP8 alone 368 tokens/s, 2.25 preemptions/s, against 381 and 2.35
    at the start). The advice doubles the blocks beside the FP8 cache (the same memory; 474
    tokens/s and none measured with 13 seats), and raises no memory share a pinned pool
    ignores."""
    doc = report("kv-pinned.vtrace")
    top = next(f for f in doc["findings"] if f["counts"])
    assert top["rule"] == "memory-ceiling", doc["reason"]
    flags = {r["knob"]: r["to"] for r in top["recommendations"]}
    assert flags["kv_cache_dtype"] == "fp8" and flags["num_gpu_blocks_override"] == 48, flags
    assert "gpu_memory_utilization" not in flags, flags


def test_an_itl_median_at_a_bucket_edge_does_not_distrust_the_twin() -> None:
    """budget2-itl-edge: 2-seat steps of 10.3 ms, half the inter-token latencies under vLLM's
    10 ms bucket edge (p50 8.8 ms) where the twin's all lie above it (17.5): the self-check
    judges the mean (10.3 against 10.2 ms), and the twin may choose."""
    whatif = prepare(read_trace(str(HERE / "budget2-itl-edge.vtrace")), 300.0)
    itl = whatif.check.observed["itl_p50"], whatif.check.twin["itl_p50"]
    assert itl[0] is not None and itl[1] is not None and itl[1] > 1.5 * itl[0], itl
    assert whatif.check.confidence != "low", whatif.check.families
    latency = whatif.check.families["latency"]
    assert latency.error is not None and latency.error < 1.25, latency
