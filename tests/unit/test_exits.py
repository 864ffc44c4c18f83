"""vtop's exit codes have one home, `vtop.exits`: README's table, the report's verdicts, the
`--fail-on` policy, the command line's names and the screens' hangup all read it."""

from __future__ import annotations

import ast
import re
import signal
from pathlib import Path

import pytest

from vtop.cli import exits as cli_exits
from vtop.exits import (
    VERDICTS,
    ExitCode,
    Verdict,
    fail_on_code,
    fail_on_verdict,
    verdict_code,
)

ROOT = Path(__file__).resolve().parents[2]


def readme_table() -> set[tuple[str, int]]:
    """(name, code) for each row of README's exit-code table (in its reports section)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Reports for scripts and CI", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| ([A-Z]+) \|", section, flags=re.M)
    return {(name, int(code)) for code, name in rows}


def test_readme_lists_every_exit_code_under_its_name() -> None:
    assert readme_table() == {(name, int(code)) for name, code in ExitCode.__members__.items()}


def test_the_signal_codes_are_128_plus_the_signal() -> None:
    assert ExitCode.HANGUP == 128 + signal.SIGHUP
    assert ExitCode.INTERRUPTED == 128 + signal.SIGINT


def test_the_verdicts_follow_the_monitoring_convention_in_order() -> None:
    assert VERDICTS == ("OK", "WARNING", "CRITICAL", "UNKNOWN")
    assert [verdict_code(v) for v in VERDICTS] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="not a verdict"):
        verdict_code("USAGE")  # type: ignore[arg-type]  # a code's name, not a verdict


@pytest.mark.parametrize(
    ("status", "warning", "critical"),
    [("OK", 0, 0), ("WARNING", 1, 0), ("CRITICAL", 2, 2), ("UNKNOWN", 3, 3)],
)
def test_fail_on_lets_pass_what_is_below_it_and_never_unknown(
    status: Verdict, warning: int, critical: int
) -> None:
    assert fail_on_code(status, "warning") == warning
    assert fail_on_code(status, "critical") == critical
    assert fail_on_code(status) == warning


def test_a_misspelt_fail_on_is_refused_rather_than_passing_everything() -> None:
    assert fail_on_verdict("critical") == "CRITICAL"
    with pytest.raises(ValueError, match="warning or critical"):
        fail_on_code("CRITICAL", "CRITICAL")  # type: ignore[arg-type]  # upper case: refused


def test_the_command_line_names_are_the_enum() -> None:
    """`vtop.cli.exits` spells the same codes (the names its callers import), and `Exits`
    answers with them: 3 for usage under --report, 2 otherwise."""
    assert cli_exits.EXIT_USAGE is ExitCode.USAGE and cli_exits.EXIT_FAILED is ExitCode.FAILED
    assert cli_exits.EXIT_INTERRUPTED is ExitCode.INTERRUPTED
    assert cli_exits.Exits(report=True).usage is ExitCode.UNKNOWN
    assert cli_exits.Exits().usage == ExitCode.USAGE
    assert cli_exits.Exits.verdict("WARNING", "critical") is ExitCode.OK


def test_no_module_spells_an_exit_code_of_a_signal_itself() -> None:
    """128 + N is `ExitCode`'s to say: the screens once picked 129 by hand in two places."""
    spelt = []
    for path in sorted((ROOT / "vtop").rglob("*.py")):
        if path.name == "exits.py" and path.parent.name == "vtop":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in (129, 130):
                spelt.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            left = node.left if isinstance(node, ast.BinOp) else None
            if isinstance(left, ast.Constant) and left.value == 128:  # 128 + sig
                spelt.append(f"{path.relative_to(ROOT)}:{left.lineno}")
    assert not spelt, spelt
