"""The exported documents as YAML text: a Prometheus rule file, Alertmanager inhibit rules.

Rendering is apart from the translation so that the same `Exported` value can be checked in
tests, written to a file or printed by the command line (`vtop.cli.rules_export`), which alone
decides where the text goes. Multi-line PromQL is written as YAML block scalars (`|`) so the
file reads as the queries do; the rule file's header comment lists what was not exported and
why.
"""

from __future__ import annotations

from typing import Any

import yaml

from vtop import __version__
from vtop.triage.promql.alerts import Exported


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def rule_file(exp: Exported, *, origin: str = "") -> str:
    """The Prometheus rule file: a header comment (what was left out, and why), one group."""
    head = [
        f"# Prometheus alerting rules exported from vtop {__version__}'s rules"
        f"{' (' + origin + ')' if origin else ''}.",
        "# Regenerate with `vtop rules export --format prometheus`; needs Prometheus 2.42+",
        "# (keep_firing_for). Knobs no metric exposes are label-joined vectors: see each",
        "# alert's vtop_knobs annotation. Gauge windows are subqueries sampled at the rule",
        "# group's evaluation interval unless exported with --resolution (your scrape",
        "# interval, e.g. 15s, reads them as vtop does).",
    ]
    if exp.skipped:
        head.append("# Not exported (no PromQL equivalent):")
        head.extend(f"#   {rid}: {why}" for rid, why in exp.skipped)
    group: dict[str, Any] = {"name": exp.group}
    if exp.interval:
        group["interval"] = exp.interval
    group["rules"] = exp.alerts
    body = yaml.dump(
        {"groups": [group]}, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True
    )
    return "\n".join(head) + "\n" + body


def inhibit_file(exp: Exported) -> str:
    """Alertmanager `inhibit_rules`: a root cause silences what it explains, and critical
    silences warning of the same rule (vtop's `explains` and escalation)."""
    head = (
        "# Alertmanager inhibit rules exported from vtop: merge into alertmanager.yml.\n"
        "# A firing root cause (vtop's `explains`) silences the alerts it explains on the same\n"
        "# instance; a rule's critical alert silences its warning one.\n"
    )
    return head + yaml.dump(
        {"inhibit_rules": exp.inhibits}, Dumper=_Dumper, sort_keys=False, width=100
    )
