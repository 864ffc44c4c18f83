"""rules/README.md documents every function, signal, derived signal, context value and rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.signals.catalog import SIGNALS, Kind
from vtop.triage.derived import CONTEXT, DERIVED, KNOBS
from vtop.triage.expr import FUNCTIONS as EXPR_FUNCTIONS
from vtop.triage.loader import load_catalog
from vtop.triage.schema import FUNCTIONS

README = (Path(__file__).resolve().parents[2] / "rules" / "README.md").read_text()

NAMES = sorted(
    {*FUNCTIONS, *EXPR_FUNCTIONS, *DERIVED, *CONTEXT, *KNOBS, *load_catalog(user=False).rules}
    | {s.name for s in SIGNALS if s.kind is not Kind.INFO}
)


@pytest.mark.parametrize("name", NAMES)
def test_documented(name: str) -> None:
    assert f"`{name}" in README, f"rules/README.md does not mention `{name}`"
