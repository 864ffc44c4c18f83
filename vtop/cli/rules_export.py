"""`vtop rules export`: the command line around the PromQL export (`vtop.triage.promql`).

The translation takes plain values and returns documents; everything a user of the command
line sees is here: the parser (its own, so its errors and `--help` name `vtop rules export`;
`vtop rules --help` lists it and `vtop completion` completes it), turning `--knob`, `--targets`
and `--by` into `Options`, one line on stderr per rule skipped or not exported, where the text
goes, and the exit code: 2 (EXIT_USAGE) for arguments that cannot work or a file that cannot
be written, 1 (EXIT_FAILED) when rule files had errors (the rules that loaded are still
exported), else 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vtop import knobs
from vtop.cli import outfile, ranges
from vtop.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from vtop.cli.usage import OneLineParser
from vtop.knobs import KnobValue
from vtop.sources.targets import TargetsError, load_targets
from vtop.triage.loader import load_catalog
from vtop.triage.promql import Options, export, inhibit_file, rule_file

PROG = "vtop rules export"


class _Usage(Exception):
    """Arguments that cannot work; the message is the line after `vtop rules export: `."""


def build_parser() -> OneLineParser:
    """`vtop rules export`'s arguments (also listed by `vtop rules --help` and completed by
    `vtop completion`)."""
    p = OneLineParser(
        prog=PROG,
        description="Write vtop's rules as Prometheus alerting rules (or Alertmanager inhibit "
        "rules for their root causes).",
    )
    p.add_argument(
        "--format",
        choices=("prometheus", "alertmanager"),
        default="prometheus",
        help="prometheus: alerting rules (default); alertmanager: inhibit rules for root causes",
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here, not stdout")
    p.add_argument(
        "--rules",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="extra rule directory (repeatable), as for the monitor",
    )
    p.add_argument("--no-user", action="store_true", help="ignore $XDG_CONFIG_HOME/vtop/rules")
    p.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a knob no metric exposes, for every instance (repeatable)",
    )
    p.add_argument(
        "--targets",
        action="append",
        default=[],
        metavar="FILE",
        help="per-instance knobs from a targets file's labels (max_num_seqs=128)",
    )
    p.add_argument(
        "--by",
        default="job,instance",
        metavar="LABELS",
        help="labels an alert is per (default job,instance; must include instance)",
    )
    p.add_argument(
        "--resolution",
        default=None,
        type=ranges.PROM_STEP,
        metavar="DURATION",
        help=ranges.ranged(
            "subquery resolution, e.g. 15s (default: the evaluation interval)", ranges.PROM_STEP
        ),
    )
    p.add_argument(
        "--interval",
        default=None,
        type=ranges.PROM_STEP,
        metavar="DURATION",
        help=ranges.ranged(
            "the rule group's evaluation interval (default: Prometheus's global)",
            ranges.PROM_STEP,
        ),
    )
    return p


def _options(args: argparse.Namespace) -> Options:
    """The export's options from the parsed arguments; `_Usage` says what cannot work."""
    given: dict[str, KnobValue] = {}
    names = sorted(n for n, spec in knobs.KNOBS.items() if spec.rules_read)
    for item in args.knob:
        name, sep, value = item.partition("=")
        if not sep or name not in names:
            raise _Usage(
                f"--knob {item!r}: expected NAME=VALUE with a knob name ({', '.join(names)})"
            )
        try:
            given[name] = knobs.parse(name, value)
        except ValueError as exc:
            raise _Usage(f"--knob {exc}") from None
    per: dict[str, dict[str, KnobValue]] = {}
    try:
        for path in args.targets:
            for t in load_targets(path):
                values = {k: v.value for k, v in t.knobs().items()}
                if values:
                    per.setdefault(t.instance, {}).update(values)
    except TargetsError as exc:
        raise _Usage(str(exc)) from None
    by = tuple(b.strip() for b in args.by.split(",") if b.strip())
    if "instance" not in by:
        raise _Usage("--by must include instance (knobs are joined on it)")
    return Options(
        by=by,
        resolution=args.resolution or "",
        interval=args.interval,
        knobs=given,
        instance_knobs=per,
        knob_sources={k: ", ".join(args.targets) for v in per.values() for k in v},
    )


def main(argv: Sequence[str]) -> int:
    """`vtop rules export --format prometheus|alertmanager [-o FILE] …`; returns the exit code."""
    args = build_parser().parse_args(list(argv))

    def fail(message: str) -> int:
        print(f"{PROG}: {message}", file=sys.stderr)
        return EXIT_USAGE

    try:
        options = _options(args)
    except _Usage as exc:
        return fail(str(exc))
    if args.output is not None:
        read = {
            "a rules file": outfile.rules_read(args.rules, user=not args.no_user),
            "a targets file": args.targets,
        }
        problem = outfile.conflict(args.output, read)
        if problem is not None:
            return fail(problem)
    loaded = load_catalog(args.rules, user=not args.no_user)
    for err in loaded.errors:
        print(f"{PROG}: rule skipped: {err}", file=sys.stderr)
    exp = export(loaded.rules.values(), options)
    for rid, why in exp.skipped:
        print(f"{PROG}: not exported: {rid}: {why}", file=sys.stderr)
    text = rule_file(exp) if args.format == "prometheus" else inhibit_file(exp)
    if args.output is None:
        sys.stdout.write(text)
    else:
        problem = outfile.write(args.output, text)
        if problem is not None:
            return fail(problem)
        alerts = len(exp.alerts) if args.format == "prometheus" else len(exp.inhibits)
        what = "alerting rules" if args.format == "prometheus" else "inhibit rules"
        print(f"{PROG}: {alerts} {what} written to {args.output}", file=sys.stderr)
    return EXIT_FAILED if loaded.errors else EXIT_OK
