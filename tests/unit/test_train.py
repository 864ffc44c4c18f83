"""Training: questions where rules start firing, the whole catalog to choose from, grading."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakerules import kv_full
from vtop.model import Finding, Knob, Recommendation, Severity
from vtop.report import train_cli
from vtop.report.train import Answer, Choice, Question, grade, parse_value, questions

ROOT = Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "tests" / "golden" / "kv-pressure.vtrace")
CATALOG = [
    Choice("budget-too-small", "Scheduler budget too small"),
    Choice("kv-cache-full", "KV cache is the wall"),
]


def test_one_question_where_the_rule_starts_firing() -> None:
    (q,) = questions(TRACE, CATALOG, findings=kv_full)
    assert q.finding.rule == "kv-cache-full" and q.choices == tuple(CATALOG)
    assert q.knobs[0] == "gpu_memory_utilization" and "max_num_seqs" in q.knobs
    assert q.points == 4 and q.number == 1
    assert (
        questions(str(ROOT / "tests" / "golden" / "busy.vtrace"), CATALOG, findings=kv_full) == []
    )


def test_a_rule_missing_from_the_catalog_is_still_offered() -> None:
    (q,) = questions(TRACE, CATALOG[:1], findings=kv_full)
    assert [c.rule for c in q.choices] == ["budget-too-small", "kv-cache-full"]


def _question(new_value: object) -> Question:
    current = Knob("max_num_seqs", 16, "process")
    rec = Recommendation("max_num_seqs", current, new_value, "raise", "x2", {})  # type: ignore[arg-type]
    f = Finding(
        "budget-too-small", "t", "e", Severity.WARNING, "firing", "s", recommendations=(rec,)
    )
    return Question(1, 0.0, "e", f, tuple(CATALOG), ("max_num_seqs",))


@pytest.mark.parametrize(
    ("answer", "points"),
    [
        (Answer("budget-too-small", "max_num_seqs", 64), 4),
        (Answer("budget-too-small", "max_num_seqs", 56), 4),  # within 25 %
        (Answer("budget-too-small", "max_num_seqs", 32), 3),
        (Answer("budget-too-small", "gpu_memory_utilization", 0.95), 2),
        (Answer("kv-cache-full", "max_num_seqs", 64), 2),
        (Answer("kv-cache-full"), 0),
    ],
)
def test_grading(answer: Answer, points: int) -> None:
    assert grade(_question(64), answer).points == points


def test_values_parse_and_compare_by_kind() -> None:
    assert parse_value(" 128 ") == 128 and parse_value("0.95") == 0.95
    assert parse_value("on") is True and parse_value("fp8") == "fp8" and parse_value("") is None
    assert grade(_question("fp8"), Answer("x", "max_num_seqs", "FP8")).value
    assert not grade(_question(True), Answer("x", "max_num_seqs", 1)).value


def test_a_session_on_stdin_reveals_and_scores() -> None:
    out = io.StringIO()
    code = train_cli.run(
        TRACE,
        stdin=io.StringIO("2\ngpu_memory_utilization\n0.95\n"),
        stdout=out,
        findings=kv_full,
        catalog=CATALOG,
    )
    text = out.getvalue()
    assert code == 0
    assert "kv-cache-full" not in text.split("diagnosis (number")[0].split(" 2. ")[0]
    assert "KV cache usage" in text and "config: " in text  # the dashboard, findings hidden
    assert "right: it was kv-cache-full" in text and "--gpu-memory-utilization 0.95" in text
    assert text.rstrip().endswith("score 4 of 4: 1 of 1 diagnoses right")


def test_end_of_input_ends_with_the_score_so_far() -> None:
    out = io.StringIO()
    train_cli.run(TRACE, stdin=io.StringIO(""), stdout=out, findings=kv_full, catalog=CATALOG)
    assert out.getvalue().rstrip().endswith("score 0 of 0: 0 of 0 diagnoses right") or (
        "(end of input)" in out.getvalue()
    )


def test_the_command_line_runs_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "--replay", "tests/golden/busy.vtrace", "--train"],
        input="",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "training on tests/golden/busy.vtrace" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "vtop", "--replay", "x", "--train", "--report"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "--train goes with --replay FILE alone" in bad.stderr
