"""What an insufficient finding lacks is a fact on the finding (`Finding.missing`), made with
its summary's words in one place (`vtop.triage.engine.lacking`), so nothing parses the words
back: the screens read the field, the report's JSON writes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.model import Finding, Severity
from vtop.triage import ruletest
from vtop.triage.engine import NOT_ENOUGH_DATA, lacking

ROOT = Path(__file__).resolve().parents[2]


def test_lacking_sets_the_fact_and_the_words_together() -> None:
    bare = Finding(
        rule="r",
        title="t",
        endpoint="e",
        severity=Severity.WARNING,
        state="insufficient",
        summary="the rule's own words",
    )
    f = lacking(bare, ["7 of 20 finished requests", "a TTFT histogram"])
    assert f.missing == ("7 of 20 finished requests", "a TTFT histogram")
    assert f.summary == "not enough data yet: 7 of 20 finished requests, a TTFT histogram"
    assert bare.missing == ()  # every other finding lacks nothing


@pytest.mark.parametrize(
    "name", ["long-prompt-starvation", "client-static-batching", "ttft-queueing"]
)
def test_the_engine_says_what_a_real_rule_lacks_on_the_field(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped rules' own tests drive the real engine into `insufficient` (by the
    measures a rule waits for, and by a suspect rule's `waits_for`); each such finding says
    what it lacks on `missing`, the same words its summary ends with."""
    seen: list[Finding] = []
    check = ruletest._check

    def spy(exp: list[object], actual: Finding | None) -> str | None:
        if actual is not None and actual.state == "insufficient":
            seen.append(actual)
        return check(exp, actual)

    monkeypatch.setattr(ruletest, "_check", spy)
    outcomes = ruletest.run_file(ROOT / "tests" / "rules" / f"{name}.test.yaml")
    assert all(not o.failures for o in outcomes), [o.failures for o in outcomes]
    assert seen, f"{name}'s tests reached no insufficient finding"
    for f in seen:
        assert f.missing and all(f.missing), f
        assert f.summary == NOT_ENOUGH_DATA + ", ".join(f.missing)
