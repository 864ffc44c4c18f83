"""Every rule test in tests/rules runs under pytest, and every shipped rule has one."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.triage.loader import load_catalog
from vtop.triage.ruletest import run_file

HERE = Path(__file__).parent
FILES = sorted(HERE.glob("*.test.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[f.name.removesuffix(".test.yaml") for f in FILES])
def test_rule_file(path: Path) -> None:
    outcomes = run_file(path)
    assert outcomes, f"{path} holds no tests"
    failures = [line for o in outcomes for line in o.failures]
    assert not failures, "\n".join(failures)
    assert all(o.evals > 0 for o in outcomes), "a test group checked nothing"


def test_every_shipped_rule_has_a_test_file() -> None:
    rules = load_catalog(user=False).rules
    missing = sorted(rid for rid in rules if not (HERE / f"{rid}.test.yaml").exists())
    assert not missing, f"rules without tests/rules/<id>.test.yaml: {missing}"


def test_every_shipped_rule_cites_its_source() -> None:
    rules = load_catalog(user=False).rules.values()
    assert all(len(r.source) > 40 for r in rules), [r.id for r in rules if len(r.source) <= 40]
