"""One rule mapping -> a `Rule`: its keys beyond the conditions, each checked as strictly.

`RuleParser` is a `CondParser` (condparse.py) that also reads what a rule says around its
conditions: severity, timing, the evidence it needs, the values it names, the evidence rows and
advice it prints, and when it escalates. It is one parser, not two, because a rule's `values:`
define names that its later expressions and templates may read, and the parser that checks
those names is the one that saw them defined. Errors are `Bad`, with the line of the key.

A rule file may come from anyone, and YAML's escapes (`"\\e]52;…\\a"`, `"\\u202e"`) put any
character in a string: every text a rule shows (title, description, source, evidence and
value labels, and the templates, in `CondParser.template`) is cleaned here (`vtop.untrusted`),
so no finding, report or alert carries a control or bidi character from a rule file.
"""

from __future__ import annotations

from typing import Literal, cast

from vtop import untrusted
from vtop.model import Severity
from vtop.triage import cost, derived
from vtop.triage.condparse import Bad, CondParser, parse_duration, placeholders
from vtop.triage.cost import quote
from vtop.triage.expr import Expr
from vtop.triage.schema import (
    FUNCTIONS,
    Decisive,
    Direction,
    Escalation,
    RecSpec,
    Requires,
    Rule,
    Suspect,
    ValueDef,
)
from vtop.triage.yamlmarks import LineDict

SEVERITIES = {"info": Severity.INFO, "warning": Severity.WARNING, "critical": Severity.CRITICAL}
DIRECTIONS: tuple[Direction, ...] = ("raise", "lower", "set", "enable", "disable")
RULE_KEYS = frozenset(
    {
        "id",
        "title",
        "severity",
        "order",
        "when",
        "summary",
        "description",
        "source",
        "for",
        "keep_firing_for",
        "requires",
        "decisive",
        "suspect",
        "explains",
        "kv_wall",
        "values",
        "evidence",
        "recommend",
        "escalate",
        "enabled",
    }
)


def _text(value: object) -> str:
    """A line of a rule file's text, made inert (`untrusted.clean`)."""
    return untrusted.clean(value, cost.MAX_TITLE_CHARS)


def _stripped(value: object) -> object:
    """Text without its surrounding blanks; anything else as it is (the template says why it
    is not text)."""
    return value.strip() if isinstance(value, str) else value


class RuleParser(CondParser):
    """Parses one rule mapping; raises `Bad` with the line of the offending key."""

    def values(self, node: object, line: int) -> tuple[ValueDef, ...]:
        if node is None:
            return ()
        if not isinstance(node, LineDict):
            raise Bad(line, "values: expected a mapping of name: measure or expression")
        out = []
        for name, spec in node.items():
            vline = node.line_of(name)
            if not name.isidentifier() or derived.name_known(name):
                raise Bad(vline, f"values: {quote(name)} must be a new plain name")
            if isinstance(spec, LineDict) and "expr" in spec:
                extra = set(spec) - {"expr", "label"}
                if extra:
                    raise Bad(
                        vline,
                        f"values: {name}: unknown key {quote(sorted(extra)[0])} "
                        "(an expression takes expr and label)",
                    )
                label = spec.get("label", "")
                if not isinstance(label, str):
                    raise Bad(vline, f"values: {name}: label must be text")
                expr = self.expr(spec["expr"], spec.line_of("expr"), f"values: {name}")
                out.append(ValueDef(name, expr=expr, label=" ".join(_text(label).split())))
            elif isinstance(spec, LineDict):
                fns = [f for f in FUNCTIONS if f in spec]
                extra = set(spec) - {*fns, "window", "q", "label"}
                if len(fns) != 1 or extra:
                    raise Bad(vline, f"values: {name}: expected one function with window/q")
                label = spec.get("label", "")
                if not isinstance(label, str):
                    raise Bad(vline, f"values: {name}: label must be text")
                out.append(
                    ValueDef(
                        name,
                        measure=self.measure(spec, fns[0]),
                        label=" ".join(_text(label).split()),
                    )
                )
            else:
                out.append(ValueDef(name, expr=self.expr(spec, vline, f"values: {name}")))
            self.value_names.add(name)
        return tuple(out)

    def recommend(self, node: object, line: int) -> tuple[RecSpec, ...]:
        if node is None:
            return ()
        if not isinstance(node, list):
            raise Bad(line, "recommend: expected a list")
        out = []
        keys = {"knob", "direction", "value", "min", "max", "round", "if", "tradeoff", "withheld"}
        for item in node:
            if not isinstance(item, LineDict):
                raise Bad(line, "recommend: every item is a mapping with knob, direction, value")
            extra = sorted(set(item) - keys)
            if extra:
                raise Bad(item.line_of(extra[0]), f"recommend: unknown key {quote(extra[0])}")
            knob = item.get("knob")
            if not isinstance(knob, str) or knob not in derived.KNOBS:
                raise Bad(item.line_of("knob"), f"recommend: unknown knob {quote(knob)}")
            direction = item.get("direction")
            if not isinstance(direction, str) or direction not in DIRECTIONS:
                raise Bad(
                    item.line_of("direction"),
                    "recommend: direction is one of " + ", ".join(DIRECTIONS),
                )
            if "value" not in item:
                raise Bad(item.line, "recommend: needs a value (number or formula)")
            value = item["value"]
            if isinstance(value, bool):
                value = "True" if value else "False"
            rounding = item.get("round", "int")
            if not isinstance(rounding, str) or rounding not in ("int", "float"):
                raise Bad(item.line_of("round"), "recommend: round is int or float")

            def opt(k: str, it: LineDict = item) -> Expr | None:
                return self.expr(it[k], it.line_of(k), f"recommend {k}") if k in it else None

            tradeoff = self.template(
                _stripped(item.get("tradeoff", "")), item.line_of("tradeoff"), "recommend tradeoff"
            )
            withheld = self.template(
                _stripped(item.get("withheld", "")), item.line_of("withheld"), "recommend withheld"
            )
            out.append(
                RecSpec(
                    knob=str(knob),
                    direction=direction,
                    value=self.expr(value, item.line_of("value"), "recommend value"),
                    minimum=opt("min"),
                    maximum=opt("max"),
                    rounding=cast(Literal["int", "float"], rounding),
                    when=opt("if"),
                    tradeoff=tradeoff,
                    tradeoff_names=placeholders(tradeoff),
                    withheld=withheld,
                    withheld_names=placeholders(withheld),
                )
            )
        return tuple(out)

    def requires(self, node: object, line: int) -> Requires:
        if node is None:
            return Requires()
        if not isinstance(node, LineDict):
            raise Bad(line, "requires: expected a mapping of evidence / finished")
        for gone in ("samples", "uptime"):
            if gone in node:
                raise Bad(
                    node.line_of(gone),
                    f"requires: {gone} is now evidence, in seconds "
                    "(e.g. evidence: 60s): polls at any interval "
                    "count for the time they cover",
                )
        extra = sorted(set(node) - {"evidence", "finished"})
        if extra:
            raise Bad(node.line_of(extra[0]), f"requires: unknown key {quote(extra[0])}")
        base = Requires()
        finished = node.get("finished", base.finished)
        if isinstance(finished, bool) or not isinstance(finished, int) or finished < 0:
            raise Bad(node.line_of("finished"), "requires: finished must be a whole number")
        evidence = parse_duration(
            node.get("evidence", base.evidence_s), node.line_of("evidence"), "requires: evidence"
        )
        return Requires(evidence, finished)

    def decisive(self, node: object, line: int) -> Decisive | None:
        if node is None:
            return None
        if not isinstance(node, LineDict) or "when" not in node or "evidence" not in node:
            raise Bad(line, "decisive: expected {evidence: DURATION, when: CONDITION}")
        extra = sorted(set(node) - {"evidence", "when"})
        if extra:
            raise Bad(node.line_of(extra[0]), f"decisive: unknown key {quote(extra[0])}")
        evidence = parse_duration(node["evidence"], node.line_of("evidence"), "decisive: evidence")
        if evidence <= 0:
            raise Bad(node.line_of("evidence"), "decisive: evidence must be positive")
        return Decisive(evidence, self.cond(node["when"], node.line_of("when")))

    def suspect(self, node: object, line: int) -> Suspect | None:
        if node is None:
            return None
        if not isinstance(node, LineDict) or "when" not in node or "waits_for" not in node:
            raise Bad(line, "suspect: expected {when: CONDITION, waits_for: TEXT}")
        extra = sorted(set(node) - {"when", "waits_for"})
        if extra:
            raise Bad(node.line_of(extra[0]), f"suspect: unknown key {extra[0]!r}")
        waits_for = node["waits_for"]
        if not isinstance(waits_for, str) or not waits_for.strip():
            raise Bad(node.line_of("waits_for"), "suspect: waits_for must be text")
        return Suspect(self.cond(node["when"], node.line_of("when")), " ".join(waits_for.split()))

    def text(self, node: LineDict, key: str, limit: int) -> str:
        """A rule's plain text (title, description, source): text or a number, within the cost
        model's length."""
        value = node.get(key, "")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise Bad(node.line_of(key), f"{key}: expected text, got {quote(value)}")
        said = str(value)
        problem = cost.too_long(key, said, limit)
        if problem is not None:
            raise Bad(node.line_of(key), problem)
        return said

    def rule(self, node: LineDict, file: str) -> Rule:
        extra = sorted(set(node) - RULE_KEYS)
        if extra:
            raise Bad(node.line_of(extra[0]), f"unknown key {quote(extra[0])}")
        for k in ("title", "severity", "when", "summary"):
            if k not in node:
                raise Bad(node.line, f"missing {quote(k)}")
        sev = node["severity"]
        if not isinstance(sev, str) or sev not in SEVERITIES:
            raise Bad(node.line_of("severity"), "severity is one of info, warning, critical")
        order = node.get("order", 100)
        if isinstance(order, bool) or not isinstance(order, int):
            raise Bad(node.line_of("order"), "order must be a whole number")
        explains = node.get("explains", [])
        if not isinstance(explains, list) or not all(isinstance(x, str) for x in explains):
            raise Bad(node.line_of("explains"), "explains: expected a list of rule ids")
        cond = self.cond(node["when"], node.line_of("when"))
        values = self.values(node.get("values"), node.line_of("values"))
        escalate = []
        items = node.get("escalate") or []
        if not isinstance(items, list):
            raise Bad(node.line_of("escalate"), "escalate: expected a list of {severity, when}")
        for item in items:
            if (
                not isinstance(item, LineDict)
                or not isinstance(item.get("severity"), str)
                or (item["severity"] not in SEVERITIES)
            ):
                raise Bad(node.line_of("escalate"), "escalate: items are {severity, when}")
            when = self.cond(item.get("when"), item.line_of("when"))
            escalate.append(Escalation(SEVERITIES[item["severity"]], when))
        evidence = node.get("evidence") or LineDict()
        if not isinstance(evidence, LineDict):
            raise Bad(node.line_of("evidence"), "evidence: expected a mapping of label: text")
        for k in evidence:
            problem = cost.too_long(f"evidence {quote(k)}", k, cost.MAX_TITLE_CHARS)
            if problem is not None:
                raise Bad(evidence.line_of(k), problem)
        rows = tuple(
            (
                untrusted.clean(k, cost.MAX_TITLE_CHARS),
                self.template(v, evidence.line_of(k), f"evidence {quote(k)}"),
            )
            for k, v in evidence.items()
        )
        kv_wall = node.get("kv_wall", False)
        if not isinstance(kv_wall, bool):
            raise Bad(node.line_of("kv_wall"), "kv_wall is true or false")
        return Rule(
            id=self.rid,
            title=_text(self.text(node, "title", cost.MAX_TITLE_CHARS)),
            severity=SEVERITIES[sev],
            order=order,
            when=cond,
            summary=self.template(node["summary"], node.line_of("summary"), "summary"),
            file=file,
            line=node.line,
            description=untrusted.block(
                self.text(node, "description", cost.MAX_PROSE_CHARS)
            ).strip(),
            source=untrusted.clean(
                self.text(node, "source", cost.MAX_PROSE_CHARS), cost.MAX_PROSE_CHARS
            ).strip(),
            for_s=parse_duration(node.get("for", 0), node.line_of("for"), "for"),
            keep_firing_for_s=parse_duration(
                node.get("keep_firing_for", 0), node.line_of("keep_firing_for"), "keep_firing_for"
            ),
            requires=self.requires(node.get("requires"), node.line_of("requires")),
            decisive=self.decisive(node.get("decisive"), node.line_of("decisive")),
            suspect=self.suspect(node.get("suspect"), node.line_of("suspect")),
            explains=tuple(explains),
            kv_wall=kv_wall,
            values=values,
            evidence=rows,
            recommend=self.recommend(node.get("recommend"), node.line_of("recommend")),
            escalate=tuple(escalate),
        )
