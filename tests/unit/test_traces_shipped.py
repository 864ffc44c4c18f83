"""The traces shipped in traces/: small, readable, described, and naming their incident."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from vtop.report.run import replay_document
from vtop.trace import TraceReader

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "traces").glob("*.vtrace"))
NOT_YET = {"long-prompt-starvation", "ttft-queueing"}
"""Scenarios whose rule does not fire on the twin yet (rule and twin calibration pending)."""


def test_there_is_a_trace_per_scenario() -> None:
    from vtop.sim.scenarios import SCENARIOS

    assert {p.stem for p in TRACES} >= set(SCENARIOS)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_shipped_trace_is_small_sound_and_described(path: Path) -> None:
    assert path.stat().st_size < 1 << 20
    with TraceReader(path, warn=pytest.fail) as r:
        assert r.indexed and r.stats().polls >= 300
        assert r.header.sources
    readme = (ROOT / "traces" / "README.md").read_text(encoding="utf-8")
    assert f"## `{path.name}`:" in readme


@pytest.mark.skipif(
    importlib.util.find_spec("vtop.triage.engine") is None, reason="no rule engine in this build"
)
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_each_simulated_incident_is_named_by_its_rule(path: Path) -> None:
    from vtop.sim.scenarios import SCENARIOS

    scenario = SCENARIOS.get(path.stem)
    if scenario is None:
        pytest.skip("not a simulator trace")
    if path.stem in NOT_YET:
        pytest.xfail("rule and twin calibration pending")
    doc = replay_document(str(path))
    fired = {f["rule"] for f in doc["findings"] if f["state"] == "firing"}
    if scenario.rule is None:
        assert doc["status"] == "OK"
    else:
        assert scenario.rule in fired
