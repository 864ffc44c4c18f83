"""`vtop rules list | check | test | export`: the rule catalog from the command line.

`list` shows what would run (shipped rules, then the user's directory, then `--rules`),
`check` validates rule files and exits 1 with one `file:line: rule-id: message` line per error
(for CI and editors), and `test` runs rule tests (`*.test.yaml`, promtool style) and ends with
the plain `N passed, N failed` line test runners print. `export` (vtop/cli/rules_export.py) is
listed here with its own parser and run by its own `main`, so its messages name
`vtop rules export`. Without a sub-command the help is printed (exit 2): it names them all.

The work is the triage package's (loading, checking, running rule tests); this module parses,
prints and picks the exit code. `vtop rules test` without a path finds the shipped rules' tests
itself (`with_default_rule_tests`), so it proves the catalog in a checkout and installed alike.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vtop import untrusted
from vtop.cli import rules_export
from vtop.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from vtop.cli.usage import OneLineParser
from vtop.triage.loader import check, load_catalog, load_paths
from vtop.triage.ruletest import TestFileError, run_file, test_files
from vtop.triage.schema import Rule

PATHS = "FILE_OR_DIR"
"""What `check` and `test` take: the name says a folder will do (`vtop completion` completes
files and folders for it)."""


def build_parser() -> argparse.ArgumentParser:
    """`vtop rules` and its commands (`export` with its own parser: help, completion)."""
    p = OneLineParser(prog="vtop rules", description="List, check, test and export rules.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    ls = sub.add_parser("list", help="the rules that would run: id, severity, title")
    ls.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="DIR",
        type=Path,
        help="extra rule directory (repeatable; later ones win by id)",
    )
    ls.add_argument("--no-user", action="store_true", help="ignore $XDG_CONFIG_HOME/vtop/rules")
    ck = sub.add_parser("check", help="validate rule files (default: the whole catalog)")
    ck.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar=PATHS,
        help="a rule file (*.yaml), or a folder whose *.yaml files are read (not "
        "its sub-folders), one or more; none: the whole catalog, yours "
        "included",
    )
    ts = sub.add_parser(
        "test", help="run rule tests (*.test.yaml; default: the shipped rules' tests)"
    )
    ts.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar=PATHS,
        help="a rule test file (*.test.yaml), or a folder whose *.test.yaml files "
        "are run (not its sub-folders), one or more; none: the shipped rules' "
        "tests",
    )
    ts.add_argument("-q", "--quiet", action="store_true", help="print failures only")
    sub.add_parser(
        "export",
        help="write the rules as Prometheus alerting rules (or Alertmanager inhibit rules)",
    )
    sub.choices["export"] = rules_export.build_parser()  # its own parser: help, completion
    return p


def severities(rule: Rule) -> str:
    """`warning`, or `warning→critical` for a rule that escalates: the levels it can reach."""
    levels = [rule.severity.name.lower()]
    for e in rule.escalate:
        name = e.severity.name.lower()
        if name not in levels:
            levels.append(name)
    return "→".join(levels)


def cmd_list(rules: Sequence[Path], user: bool) -> int:
    loaded = load_catalog(rules, user=user)
    for err in loaded.errors:
        print(err, file=sys.stderr)
    for rule in sorted(loaded.rules.values(), key=lambda r: (r.order, r.id)):
        print(f"{rule.id:<28} {severities(rule):<16} {rule.title}")
    for rid in sorted(loaded.disabled):
        print(f"{rid:<28} {'off':<16} (disabled by a user rule)")
    return EXIT_FAILED if loaded.errors else EXIT_OK


def cmd_check(paths: Sequence[Path]) -> int:
    if paths:
        missing = [p for p in paths if not p.exists()]
        for p in missing:
            print(f"{p}:0: -: no such file or directory", file=sys.stderr)
        loaded = load_catalog(user=False)
        shipped_errors = len(loaded.errors)
        own = load_paths([p for p in paths if p.exists()])
        loaded.merge(own)
        errors = loaded.errors[shipped_errors:] + [e for e in check(loaded) if e.rule in own.rules]
        count = len(own.rules)
        if missing:
            return EXIT_FAILED
    else:
        loaded = load_catalog(user=True)
        errors = loaded.errors
        count = len(loaded.rules)
    for err in errors:
        print(err, file=sys.stderr)
    if errors:
        print(f"{len(errors)} error(s)", file=sys.stderr)
        return EXIT_FAILED
    print(f"ok: {count} rule(s)")
    return EXIT_OK


def _line(text: str) -> None:
    """A line of `rules test`: test files are anyone's, and say what they like (`untrusted`)."""
    print(untrusted.clean(text, None))


def cmd_test(paths: Sequence[Path], quiet: bool) -> int:
    if not paths:
        default = Path("tests/rules")
        if not default.is_dir():
            print("vtop rules test: give rule test files or directories", file=sys.stderr)
            return EXIT_USAGE
        paths = [default]
    passed = failed = 0
    for f in test_files(paths):
        try:
            outcomes = run_file(f)
        except TestFileError as exc:
            _line(f"ERROR {exc}")
            failed += 1
            continue
        for o in outcomes:
            if o.ok:
                passed += 1
                if not quiet:
                    _line(f"PASS {o.file}: {o.name} ({o.evals} evaluations checked)")
            else:
                failed += 1
                _line(f"FAIL {o.file}: {o.name}")
                for line in o.failures:
                    _line(f"  {line}")
    print(f"{passed} passed, {failed} failed")
    return EXIT_FAILED if failed else EXIT_OK


def shipped_rule_tests() -> Path:
    """The shipped rules' own tests: `vtop/_rule_tests` in a wheel, `tests/rules` in a checkout
    (beside the shipped rules, as `vtop.triage.loader.shipped_dir` finds them)."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_rule_tests"
    return packaged if packaged.is_dir() else package.parent / "tests" / "rules"


def with_default_rule_tests(argv: list[str]) -> list[str]:
    """`rules test` without a path: `tests/rules` here, as before, else the shipped rules' tests
    (an installed vtop has no tests/rules), so `vtop rules test` proves the catalog anywhere."""
    if argv[:1] != ["test"] or any(not a.startswith("-") for a in argv[1:]) or "--" in argv:
        return argv
    if Path("tests/rules").is_dir():
        return argv
    return [*argv, str(shipped_rule_tests())]


def main(argv: Sequence[str]) -> int:
    """`vtop rules …` (the words after `rules`); returns the exit code."""
    argv = with_default_rule_tests(list(argv))
    if argv[:1] == ["export"]:  # its own parser, so its errors name `vtop rules export`
        return rules_export.main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.cmd == "list":
        return cmd_list(args.rules, not args.no_user)
    if args.cmd == "check":
        return cmd_check(args.paths)
    if args.cmd == "test":
        return cmd_test(args.paths, args.quiet)
    raise AssertionError(f"vtop rules {args.cmd} is dispatched before parsing")
