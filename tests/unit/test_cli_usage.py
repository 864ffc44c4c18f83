"""The command line's exit codes, run as a user runs it: usage errors, and `--fail-on`.

A usage error is one line (no usage block) and exits 2, or 3 (UNKNOWN) when `--report` is on
the command line, where 2 would read as CRITICAL. `--fail-on critical` is tested end to end on
shipped traces: a WARNING trace exits 1 by default and 0 with it; a CRITICAL one stays 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vtop.cli.exits import Exits, report_requested

ROOT = Path(__file__).resolve().parents[2]
WARNING_TRACE = "traces/budget-too-small.vtrace"
CRITICAL_TRACE = "traces/memory-ceiling.vtrace"


def vtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--demo", "--format", "bogus"],
            2,
            "vtop: error: argument --format: invalid choice: 'bogus' (choose from",
        ),
        (
            ["--demo", "--report", "--format", "bogus"],
            3,
            "vtop: error: argument --format: invalid choice: 'bogus' (choose from",
        ),
        (
            ["--report", "--interval", "soon"],
            3,
            "vtop: error: argument --interval: invalid float value: 'soon'",
        ),
        (["--repor", "--no-such-flag"], 3, "vtop: error: unrecognized arguments: --no-such-flag"),
        (["--url"], 2, "vtop: error: argument --url: expected one argument"),
        (["--demo", "nope", "--report"], 3, "vtop: unknown scenario 'nope'"),
        (["--demo", "nope"], 2, "vtop: unknown scenario 'nope'"),
        (["sim", "--bogus"], 2, "vtop sim: error: unrecognized arguments: --bogus"),
        (
            ["trace", "info"],
            2,
            "vtop trace info: error: the following arguments are required: FILE",
        ),
        (
            ["rules", "lst"],
            2,
            "vtop rules: error: argument COMMAND: invalid choice: 'lst' (choose from 'list', "
            "'check', 'test', 'export')",
        ),
        (["rules", "list", "--nope"], 2, "vtop rules: error: unrecognized arguments: --nope"),
        (
            ["rules", "export", "--format", "yaml"],
            2,
            "vtop rules export: error: argument --format: invalid choice: 'yaml' (choose from",
        ),
    ],
)
def test_usage_errors_are_one_line_and_unknown_under_report(
    args: list[str], code: int, message: str
) -> None:
    result = vtop(*args)
    assert (result.returncode, result.stdout) == (code, "")
    assert result.stderr.startswith(message), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "usage:" not in result.stderr


def test_help_still_exits_0_with_the_usage() -> None:
    result = vtop("--report", "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: vtop")


@pytest.mark.parametrize(
    ("command", "commands"),
    [(["rules"], ["list", "check", "test", "export"]), (["trace"], ["info"])],
)
def test_a_sub_command_without_its_command_prints_the_choices(
    command: list[str], commands: list[str]
) -> None:
    bare = vtop(*command)
    assert (bare.returncode, bare.stdout) == (2, "")
    assert bare.stderr.startswith(f"usage: vtop {command[0]} ")
    assert "required" not in bare.stderr, bare.stderr  # not argparse's "required: cmd"
    listed = [line.split()[0] for line in bare.stderr.splitlines() if line.startswith("    ")]
    assert [w for w in listed if w in commands] == commands, bare.stderr
    helped = vtop(*command, "--help")
    assert (helped.returncode, helped.stdout) == (0, bare.stderr)


def test_rules_help_lists_export_and_export_still_runs(tmp_path: Path) -> None:
    assert "    export " in vtop("rules", "--help").stdout
    out = tmp_path / "alerts.yaml"
    result = vtop("rules", "export", "--no-user", "--format", "prometheus", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "alerting rules written to" in result.stderr
    assert "\ngroups:" in out.read_text()
    helped = vtop("rules", "export", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: vtop rules export ")
    assert "--format {prometheus,alertmanager}" in helped.stdout


def test_report_is_recognised_as_argparse_would_read_it() -> None:
    assert report_requested(["--url", "h", "--report"])
    assert report_requested(["--repo"]) and report_requested(["--report=x"])
    assert not report_requested(["--rep"])  # ambiguous: --replay or --report
    assert not report_requested(["--replay", "x.vtrace"])
    assert not report_requested(["--", "--report"])
    assert (Exits.for_argv(["--report"]).usage, Exits.for_argv([]).usage) == (3, 2)


@pytest.mark.parametrize(
    ("trace", "args", "code"),
    [
        (WARNING_TRACE, [], 1),
        (WARNING_TRACE, ["--fail-on", "warning"], 1),
        (WARNING_TRACE, ["--fail-on", "critical"], 0),
        (CRITICAL_TRACE, ["--fail-on", "critical"], 2),
    ],
)
def test_fail_on_sets_the_exit_code(trace: str, args: list[str], code: int) -> None:
    result = vtop("--replay", trace, "--report", *args)
    assert result.returncode == code, result.stderr
    status = {0: "WARNING", 1: "WARNING", 2: "CRITICAL"}[code]
    assert result.stdout.startswith(f"vtop report: {status} ("), result.stdout[:200]
