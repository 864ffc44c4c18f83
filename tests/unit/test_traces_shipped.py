"""The traces shipped in traces/: small, readable, described, and naming their incident."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vtop.report.run import replay_document
from vtop.sim.scenarios import SCENARIOS
from vtop.trace import TraceReader

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "traces").glob("*.vtrace"))
SIMULATED = [p for p in TRACES if p.stem in SCENARIOS]
RECORDED = [p for p in TRACES if p.stem not in SCENARIOS]
"""Traces of real servers, described by hand in traces/README.md."""
README = (ROOT / "traces" / "README.md").read_text(encoding="utf-8")


def named_by_readme(path: Path) -> set[str]:
    """The rules traces/README.md says should name the trace ("none": the empty set)."""
    section = README.split(f"## `{path.name}`:", 1)[1].split("\n## ", 1)[0]
    said = re.search(r"[Rr]ule that should name it(?::| is) (none|`[a-z-]+`)", section)
    assert said, f"traces/README.md does not say which rule should name {path.name}"
    return set() if said[1] == "none" else {said[1].strip("`")}


def test_there_is_a_trace_per_scenario_and_a_real_one() -> None:
    assert {p.stem for p in TRACES} >= set(SCENARIOS)
    assert RECORDED


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_shipped_trace_is_small_sound_and_described(path: Path) -> None:
    assert path.stat().st_size < 1 << 20
    with TraceReader(path, warn=pytest.fail) as r:
        assert r.indexed and r.stats().polls >= 300
        assert r.header.sources
    assert f"## `{path.name}`:" in README


@pytest.mark.parametrize("path", SIMULATED, ids=lambda p: p.stem)
def test_each_simulated_incident_is_named_by_its_rule(path: Path) -> None:
    scenario = SCENARIOS[path.stem]
    assert named_by_readme(path) == ({scenario.rule} if scenario.rule else set())
    doc = replay_document(str(path))
    fired = {f["rule"] for f in doc["findings"] if f["state"] == "firing"}
    if scenario.rule is None:
        assert doc["status"] == "OK"
    else:
        assert scenario.rule in fired


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_each_recorded_incident_yields_what_its_readme_says(path: Path) -> None:
    """A real server's trace: exactly the rules its description names fire, and every other
    finding is explained by one of them (nothing beside them, nothing contradicting them)."""
    expected = named_by_readme(path)
    doc = replay_document(str(path))
    fired = {f["rule"] for f in doc["findings"] if f["state"] == "firing"}
    assert fired == expected
    others = [f for f in doc["findings"] if f["rule"] not in expected]
    assert all(f["suppressed_by"] in expected for f in others), others
