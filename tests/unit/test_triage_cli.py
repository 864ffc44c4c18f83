"""`vtop rules list | check | test` as a user runs them: exit codes and one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def vtop(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
        env=env,
    )


def test_list_shows_every_rule_on_one_line(tmp_path: Path) -> None:
    out = vtop("rules", "list", "--no-user")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("memory-ceiling ") and "warning" in line for line in lines)
    assert len(lines) == len(list((ROOT / "rules").glob("*.yaml")))


def test_list_shows_every_severity_a_rule_can_reach(tmp_path: Path) -> None:
    """memory-ceiling escalates to critical (issue 18): `warning` alone undersold it. A rule
    whose escalation repeats its own severity says it once."""
    (tmp_path / "same.yaml").write_text(
        "id: same-level\ntitle: t\nseverity: warning\nsummary: s\nsource: x\n"
        "when: {rate: preemptions, window: 2m, above: 0}\n"
        "escalate:\n  - severity: warning\n    when: {rate: preemptions, window: 2m, above: 1}\n"
    )
    out = vtop("rules", "list", "--no-user", "--rules", str(tmp_path))
    assert out.returncode == 0, out.stderr
    level = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()}
    assert level["memory-ceiling"] == "warning→critical"
    assert level["past-sweet-spot"] == "warning→critical"
    assert level["budget-too-small"] == "warning" and level["underloaded"] == "info"
    assert level["same-level"] == "warning"


def test_check_passes_on_the_shipped_rules() -> None:
    out = vtop("rules", "check", str(ROOT / "rules"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok: ")


def test_check_fails_with_file_line_and_rule_id(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: my-rule\ntitle: t\nseverity: warning\nsummary: s\nwhen:\n"
        "  rate: preemptions\n  window: 2m\n  above: 0.5 * max_num_sqs\n"
    )
    out = vtop("rules", "check", str(bad))
    assert out.returncode == 1
    first = out.stderr.splitlines()[0]
    assert first.startswith(f"{bad}:8: my-rule: above: unknown name 'max_num_sqs'"), first


def test_test_runs_rule_tests_and_reports_failures(tmp_path: Path) -> None:
    good = vtop("rules", "test", "-q", str(ROOT / "tests" / "rules" / "underloaded.test.yaml"))
    assert good.returncode == 0, good.stdout
    assert good.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")
    wrong = tmp_path / "wrong.test.yaml"
    wrong.write_text(
        "tests:\n  - name: claims a fire that cannot happen\n    knobs: {max_num_seqs: 64}\n"
        "    input_series:\n      - {series: running, values: '1x100'}\n"
        "    finding_tests:\n      - {rule: memory-ceiling, eval_time: 90s, exp_findings: "
        "[{state: firing}]}\n"
    )
    bad = vtop("rules", "test", str(wrong))
    assert bad.returncode == 1
    assert f"{wrong}:7: claims a fire that cannot happen: at 90 s: memory-ceiling: expected " in (
        bad.stdout
    )
    assert "0 passed, 1 failed" in bad.stdout


def test_broken_user_rules_are_reported_and_skipped(tmp_path: Path) -> None:
    rules = tmp_path / "vtop" / "rules"
    rules.mkdir(parents=True)
    (rules / "x.yaml").write_text("id: x\ntitle: t\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    out = vtop("rules", "list", env=env)
    assert out.returncode == 1
    assert "x.yaml:1: x: missing 'severity'" in out.stderr
    assert "memory-ceiling" in out.stdout
