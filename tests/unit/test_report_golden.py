"""Golden files: the text and Markdown reports of fixed traces, byte for byte.

A change to a report's wording or layout shows up here as a diff to review; accept it with
`UPDATE_GOLDEN=1 pytest tests/unit/test_report_golden.py`. The traces themselves are committed
format-1 files, so this also proves old traces keep reading.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakerules import kv_full
from vtop.report import render
from vtop.report.document import Document
from vtop.report.run import replay_document

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SUFFIX = {"text": "txt", "markdown": "md"}


def document(trace: str, with_rule: bool) -> Document:
    path = str(GOLDEN / f"{trace}.vtrace")
    doc = replay_document(path, findings=kv_full) if with_rule else replay_document(path)
    doc["vtop"] = "X.Y.Z"  # a release must not churn the goldens
    return doc


@pytest.mark.parametrize("fmt", ["text", "markdown"])
@pytest.mark.parametrize(("trace", "with_rule"), [("busy", False), ("kv-pressure", True)])
def test_report_matches_golden(trace: str, with_rule: bool, fmt: str) -> None:
    got = render(document(trace, with_rule), fmt)
    path = GOLDEN / f"{trace}.report.{SUFFIX[fmt]}"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(got, encoding="utf-8")
    assert path.exists(), f"{path.name} missing: run with UPDATE_GOLDEN=1"
    assert got == path.read_text(encoding="utf-8")


def test_the_cli_prints_the_same_report() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "--replay", str(GOLDEN / "busy.vtrace"), "--report"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (GOLDEN / "busy.report.txt").read_text(encoding="utf-8")
