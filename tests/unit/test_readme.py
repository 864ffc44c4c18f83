"""README is the user's first contact: it must list every shipped rule and name the commands
CI really runs."""

from __future__ import annotations

import re
from pathlib import Path

from vtop.triage.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_readme_lists_every_shipped_rule() -> None:
    shipped = {rule.id for rule in Engine.from_catalog(user=False).rules}
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", README, flags=re.M))
    assert shipped == listed


def test_the_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test.sh" in README
    assert "exec ./scripts/test.sh" in ci


def test_screenshots_referenced_exist() -> None:
    for path in re.findall(r"\((screenshots/[^)]+)\)", README):
        assert (ROOT / path).is_file(), path
