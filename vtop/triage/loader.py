"""Rule files -> `Rule` values, with every error as one line: file:line: rule-id: what.

Rules ship in `rules/` (inside the wheel as `vtop/_rules`); users add or replace them, by id,
from `$XDG_CONFIG_HOME/vtop/rules` and from `--rules DIR`, later sources winning. A rule that
only says `{id: X, enabled: false}` switches a shipped rule off (a knob another controller
owns). A broken rule is reported and skipped; the others still load, so one typo in a user rule
never takes the monitor down.

Validation is strict because rules run unattended: unknown keys, signals, functions, names
and knobs are errors, every expression is parsed and checked here (see `expr`), and operands
must suit their function (a counter takes `rate`, a histogram `histogram_quantile`).
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from vtop import durations
from vtop.model import Severity
from vtop.signals.catalog import BY_NAME, Kind
from vtop.triage import derived
from vtop.triage.expr import Expr, ExprError, compile_expr
from vtop.triage.schema import (
    CLEAR,
    FUNCTIONS,
    GAUGE_FUNCTIONS,
    OPS,
    All,
    AnyOf,
    Compare,
    Cond,
    Decisive,
    Direction,
    Escalation,
    Function,
    IfKnown,
    KnobIs,
    Measure,
    Not,
    Operand,
    RecSpec,
    Requires,
    Rule,
    Sample,
    Threshold,
    ValueDef,
)
from vtop.triage.yamlmarks import LineDict, YamlError, load

SEVERITIES = {"info": Severity.INFO, "warning": Severity.WARNING, "critical": Severity.CRITICAL}
DIRECTIONS: tuple[Direction, ...] = ("raise", "lower", "set", "enable", "disable")
RULE_KEYS = frozenset({
    "id", "title", "severity", "order", "when", "summary", "description", "source", "for",
    "keep_firing_for", "requires", "decisive", "explains", "kv_wall", "values", "evidence",
    "recommend", "escalate", "enabled",
})  # fmt: skip
_COMBINATORS = ("all", "any", "not", "if_known")
_ID = re.compile(r"^[a-z][a-z0-9-]*$")
_OPERAND = re.compile(r'^([a-z_][a-z0-9_]*)(?:\{(?:([a-z_]+)=)?"?([^"}]*)"?\})?$')
SINCE_START = "since_start"
"""The window that reaches back to the server's start (`Measure.since_start`)."""
_ID_LINE = re.compile(r"(?:^|[\s{,-])id:\s*[\"']?([a-z][a-z0-9-]*)")


@dataclass(frozen=True, slots=True)
class RuleError:
    file: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule or '-'}: {self.message}"


class _Bad(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _placeholders(template: str) -> tuple[str, ...]:
    return tuple(f for _, f, _, _ in string.Formatter().parse(template) if f)


def parse_duration(value: object, line: int, what: str) -> float:
    """A YAML duration: a number of seconds, or text `vtop.durations` reads (30s, 2m, 1h30m)."""
    if isinstance(value, bool):
        raise _Bad(line, f"{what}: expected a duration like 30s or 2m, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise _Bad(line, f"{what}: a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        try:
            return durations.parse(value)
        except ValueError:
            pass
    raise _Bad(line, f"{what}: expected a duration like 30s or 2m, got {value!r}")


class _RuleParser:
    """Parses one rule mapping; raises _Bad with the line of the offending key."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.value_names: set[str] = set()

    # -- names and expressions ----------------------------------------------------------------

    def allowed(self, name: str) -> bool:
        return derived.name_known(name) or name in self.value_names

    def expr(self, text: object, line: int, what: str) -> Expr:
        if isinstance(text, bool) or not isinstance(text, str | int | float):
            raise _Bad(line, f"{what}: expected a number or an expression, got {text!r}")
        try:
            return compile_expr(str(text), self.allowed)
        except ExprError as exc:
            raise _Bad(line, f"{what}: {exc}") from None

    def threshold(self, value: object, line: int, what: str) -> Threshold:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return self.expr(value, line, what)

    def template(self, text: object, line: int, what: str) -> str:
        if not isinstance(text, str):
            raise _Bad(line, f"{what}: expected text, got {text!r}")
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise _Bad(line, f"{what}: {exc}") from None
        for _, field_name, spec, conversion in parsed:
            if field_name is None:
                continue
            if not field_name.isidentifier() or conversion is not None:
                raise _Bad(line, f"{what}: placeholder {{{field_name}}} must be a plain name")
            if not self.allowed(field_name):
                raise _Bad(line, f"{what}: unknown name {field_name!r} in placeholder")
            try:
                format(1.0, spec or "")
            except ValueError:
                raise _Bad(line, f"{what}: bad format {spec!r} for {field_name}") from None
        return text

    # -- conditions -----------------------------------------------------------------------------

    def operand(self, text: object, fn: Function, line: int) -> Operand:
        if not isinstance(text, str) or not (m := _OPERAND.match(text.strip())):
            raise _Bad(line, f"{fn}: expected a signal name, got {text!r}")
        name, label_name, label = m.group(1), m.group(2), m.group(3) or ""
        sig = BY_NAME.get(name)
        der = derived.DERIVED.get(name)
        if sig is None and der is None:
            raise _Bad(line, f"unknown signal {name!r} (see rules/README.md for the list)")
        if label:
            if sig is None or sig.label is None:
                raise _Bad(line, f"signal {name!r} has no label to select")
            if label_name and label_name != sig.label:
                raise _Bad(
                    line, f"signal {name!r} is labelled by {sig.label!r}, not {label_name!r}"
                )
        if der is not None:
            if fn == "value" and der.kind != "window":
                raise _Bad(line, f"value: {name!r} is a per-poll signal; use avg_over_time etc.")
            if fn != "value" and der.kind == "window":
                raise _Bad(line, f"{fn}: {name!r} only exists over a window; use value:")
            if fn not in GAUGE_FUNCTIONS and fn != "value":
                raise _Bad(line, f"{fn}: does not apply to derived signal {name!r}")
        elif sig is not None:
            kind = sig.kind
            if fn == "value":
                raise _Bad(line, f"value: takes a window-derived signal, not {name!r}")
            if kind is Kind.HISTOGRAM and fn not in ("histogram_quantile", "histogram_mean"):
                raise _Bad(line, f"{fn}: {name!r} is a histogram; use histogram_quantile")
            if kind is Kind.COUNTER and fn not in ("rate", "increase"):
                raise _Bad(line, f"{fn}: {name!r} is a counter; use rate or increase")
            if kind in (Kind.GAUGE, Kind.INFO) and fn not in GAUGE_FUNCTIONS:
                raise _Bad(line, f"{fn}: {name!r} is a gauge; use last or *_over_time")
        return Operand(name, label)

    def measure(self, node: LineDict, fn: Function) -> Measure:
        line = node.line_of(fn)
        window = 0.0
        since_start = False
        if fn != "last":
            if "window" not in node:
                raise _Bad(line, f"{fn}: needs a window (e.g. window: 2m)")
            wline = node.line_of("window")
            if node["window"] == SINCE_START:
                since_start = True
                self.since_start_operand(node, fn, wline)
            else:
                window = parse_duration(node["window"], wline, "window")
                if window <= 0:
                    raise _Bad(wline, "window must be positive")
        q: float | None = None
        if fn in ("quantile_over_time", "histogram_quantile"):
            qv = node.get("q")
            if isinstance(qv, bool) or not isinstance(qv, int | float) or not 0 <= qv <= 1:
                raise _Bad(node.line_of("q"), f"{fn}: needs q between 0 and 1")
            q = float(qv)
        elif "q" in node:
            raise _Bad(node.line_of("q"), f"{fn}: takes no q")
        if fn == "share_over_time":
            sub = node[fn]
            if not isinstance(sub, LineDict):
                raise _Bad(line, "share_over_time: expected a sub-condition mapping")
            return Measure(fn, None, window, None, self.sample_cond(sub))
        return Measure(fn, self.operand(node[fn], fn, line), window, q, since_start=since_start)

    def since_start_operand(self, node: LineDict, fn: Function, line: int) -> None:
        """`window: since_start` reads what the server counted since it started: counters,
        histograms and the window-derived values built from them, never a gauge (the server
        keeps no history of a gauge; only vtop's polls do)."""
        if fn in ("rate", "increase", "histogram_quantile", "histogram_mean"):
            return
        name = str(node.get(fn, "")).strip()
        if fn == "value" and name in derived.SINCE_START_VALUES:
            return
        raise _Bad(line, f"{fn}: window {SINCE_START} takes a counter, a histogram or one of "
                         + ", ".join(sorted(derived.SINCE_START_VALUES))
                         + " (a gauge has no history on the server)")  # fmt: skip

    def sample_cond(self, node: LineDict) -> Cond:
        if any(k in node for k in _COMBINATORS):
            return self.combinator(node, self.sample_cond)
        if "knob" in node:
            return self.knob_cond(node)
        if "signal" not in node:
            raise _Bad(node.line, "share_over_time sub-conditions compare `signal:` per poll")
        extra = set(node) - {"signal", *OPS}
        if extra:
            raise _Bad(node.line_of(sorted(extra)[0]), f"unknown key {sorted(extra)[0]!r}")
        ops = [o for o in OPS if o in node]
        if len(ops) != 1:
            raise _Bad(node.line, "a comparison needs exactly one of: " + ", ".join(OPS))
        operand = self.operand(node["signal"], "last", node.line_of("signal"))
        op = ops[0]
        return Sample(operand, op, self.threshold(node[op], node.line_of(op), op))

    def combinator(self, node: LineDict, inner: Any) -> Cond:
        keys = [k for k in _COMBINATORS if k in node]
        if len(keys) != 1 or len(node) != 1:
            raise _Bad(node.line, "a combinator mapping holds exactly one of "
                                  + " / ".join(_COMBINATORS))  # fmt: skip
        k = keys[0]
        body = node[k]
        if k in ("not", "if_known"):
            if not isinstance(body, LineDict):
                raise _Bad(node.line_of(k), f"{k}: expected one condition")
            return Not(inner(body)) if k == "not" else IfKnown(inner(body))
        if not isinstance(body, list) or not body:
            raise _Bad(node.line_of(k), f"{k}: expected a non-empty list of conditions")
        items = []
        for item in body:
            if not isinstance(item, LineDict):
                raise _Bad(node.line_of(k), f"{k}: every item must be a condition mapping")
            items.append(inner(item))
        return All(tuple(items)) if k == "all" else AnyOf(tuple(items))

    def knob_cond(self, node: LineDict) -> KnobIs:
        knob = node["knob"]
        if knob not in derived.KNOBS:
            raise _Bad(node.line_of("knob"), f"unknown knob {knob!r}")
        ops = [o for o in OPS if o in node]
        extra = set(node) - {"knob", *OPS}
        if len(ops) != 1 or extra:
            raise _Bad(node.line, "a knob test is {knob: NAME, <one comparison>: VALUE}")
        op = ops[0]
        return KnobIs(str(knob), op, node[op])

    def cond(self, node: object, line: int) -> Cond:
        if not isinstance(node, LineDict):
            raise _Bad(line, f"expected a condition mapping, got {node!r}")
        if any(k in node for k in _COMBINATORS):
            return self.combinator(node, lambda n: self.cond(n, n.line))
        if "knob" in node:
            return self.knob_cond(node)
        fns = [f for f in FUNCTIONS if f in node]
        if len(fns) != 1:
            raise _Bad(node.line, "a condition names one function: " + ", ".join(FUNCTIONS))
        fn = fns[0]
        ops = [o for o in OPS if o in node]
        if len(ops) != 1:
            raise _Bad(node.line_of(fn), f"{fn}: needs exactly one of " + ", ".join(OPS))
        op = ops[0]
        allowed = {fn, "window", "q", op, CLEAR.get(op, "")}
        extra = sorted(set(node) - allowed)
        if extra:
            raise _Bad(node.line_of(extra[0]), f"unknown key {extra[0]!r} in a {op} condition")
        clear = None
        if CLEAR.get(op) in node:
            ck = CLEAR[op]
            clear = self.threshold(node[ck], node.line_of(ck), ck)
        thr = self.threshold(node[op], node.line_of(op), op)
        return Compare(self.measure(node, fn), op, thr, clear, node.line_of(fn))

    # -- the rest of a rule ---------------------------------------------------------------------

    def values(self, node: object, line: int) -> tuple[ValueDef, ...]:
        if node is None:
            return ()
        if not isinstance(node, LineDict):
            raise _Bad(line, "values: expected a mapping of name: measure or expression")
        out = []
        for name, spec in node.items():
            vline = node.line_of(name)
            if not name.isidentifier() or derived.name_known(name):
                raise _Bad(vline, f"values: {name!r} must be a new plain name")
            if isinstance(spec, LineDict) and "expr" in spec:
                extra = set(spec) - {"expr", "label"}
                if extra:
                    raise _Bad(vline, f"values: {name}: unknown key {sorted(extra)[0]!r} "
                                      "(an expression takes expr and label)")  # fmt: skip
                label = spec.get("label", "")
                if not isinstance(label, str):
                    raise _Bad(vline, f"values: {name}: label must be text")
                expr = self.expr(spec["expr"], spec.line_of("expr"), f"values: {name}")
                out.append(ValueDef(name, expr=expr, label=" ".join(label.split())))
            elif isinstance(spec, LineDict):
                fns = [f for f in FUNCTIONS if f in spec]
                extra = set(spec) - {*fns, "window", "q", "label"}
                if len(fns) != 1 or extra:
                    raise _Bad(vline, f"values: {name}: expected one function with window/q")
                label = spec.get("label", "")
                if not isinstance(label, str):
                    raise _Bad(vline, f"values: {name}: label must be text")
                out.append(ValueDef(name, measure=self.measure(spec, fns[0]),
                                    label=" ".join(label.split())))  # fmt: skip
            else:
                out.append(ValueDef(name, expr=self.expr(spec, vline, f"values: {name}")))
            self.value_names.add(name)
        return tuple(out)

    def recommend(self, node: object, line: int) -> tuple[RecSpec, ...]:
        if node is None:
            return ()
        if not isinstance(node, list):
            raise _Bad(line, "recommend: expected a list")
        out = []
        keys = {"knob", "direction", "value", "min", "max", "round", "if", "tradeoff", "withheld"}
        for item in node:
            if not isinstance(item, LineDict):
                raise _Bad(line, "recommend: every item is a mapping with knob, direction, value")
            extra = sorted(set(item) - keys)
            if extra:
                raise _Bad(item.line_of(extra[0]), f"recommend: unknown key {extra[0]!r}")
            knob = item.get("knob")
            if knob not in derived.KNOBS:
                raise _Bad(item.line_of("knob"), f"recommend: unknown knob {knob!r}")
            direction = item.get("direction")
            if direction not in DIRECTIONS:
                raise _Bad(item.line_of("direction"),
                           "recommend: direction is one of " + ", ".join(DIRECTIONS))  # fmt: skip
            if "value" not in item:
                raise _Bad(item.line, "recommend: needs a value (number or formula)")
            value = item["value"]
            if isinstance(value, bool):
                value = "True" if value else "False"
            rounding = item.get("round", "int")
            if rounding not in ("int", "float"):
                raise _Bad(item.line_of("round"), "recommend: round is int or float")

            def opt(k: str, it: LineDict = item) -> Expr | None:
                return self.expr(it[k], it.line_of(k), f"recommend {k}") if k in it else None

            tradeoff = self.template(str(item.get("tradeoff", "")).strip(),
                                     item.line_of("tradeoff"), "recommend tradeoff")  # fmt: skip
            withheld = self.template(str(item.get("withheld", "")).strip(),
                                     item.line_of("withheld"), "recommend withheld")  # fmt: skip
            out.append(RecSpec(
                knob=str(knob), direction=cast(Direction, direction),
                value=self.expr(value, item.line_of("value"), "recommend value"),
                minimum=opt("min"), maximum=opt("max"), rounding=rounding, when=opt("if"),
                tradeoff=tradeoff, tradeoff_names=_placeholders(tradeoff),
                withheld=withheld, withheld_names=_placeholders(withheld),
            ))  # fmt: skip
        return tuple(out)

    def requires(self, node: object, line: int) -> Requires:
        if node is None:
            return Requires()
        if not isinstance(node, LineDict):
            raise _Bad(line, "requires: expected a mapping of evidence / finished")
        for gone in ("samples", "uptime"):
            if gone in node:
                raise _Bad(node.line_of(gone), f"requires: {gone} is now evidence, in seconds "
                                               "(e.g. evidence: 60s): polls at any interval "
                                               "count for the time they cover")  # fmt: skip
        extra = sorted(set(node) - {"evidence", "finished"})
        if extra:
            raise _Bad(node.line_of(extra[0]), f"requires: unknown key {extra[0]!r}")
        base = Requires()
        finished = node.get("finished", base.finished)
        if isinstance(finished, bool) or not isinstance(finished, int) or finished < 0:
            raise _Bad(node.line_of("finished"), "requires: finished must be a whole number")
        evidence = parse_duration(node.get("evidence", base.evidence_s),
                                  node.line_of("evidence"), "requires: evidence")  # fmt: skip
        return Requires(evidence, finished)

    def decisive(self, node: object, line: int) -> Decisive | None:
        if node is None:
            return None
        if not isinstance(node, LineDict) or "when" not in node or "evidence" not in node:
            raise _Bad(line, "decisive: expected {evidence: DURATION, when: CONDITION}")
        extra = sorted(set(node) - {"evidence", "when"})
        if extra:
            raise _Bad(node.line_of(extra[0]), f"decisive: unknown key {extra[0]!r}")
        evidence = parse_duration(node["evidence"], node.line_of("evidence"),
                                  "decisive: evidence")  # fmt: skip
        if evidence <= 0:
            raise _Bad(node.line_of("evidence"), "decisive: evidence must be positive")
        return Decisive(evidence, self.cond(node["when"], node.line_of("when")))

    def rule(self, node: LineDict, file: str) -> Rule:
        extra = sorted(set(node) - RULE_KEYS)
        if extra:
            raise _Bad(node.line_of(extra[0]), f"unknown key {extra[0]!r}")
        for k in ("title", "severity", "when", "summary"):
            if k not in node:
                raise _Bad(node.line, f"missing {k!r}")
        sev = node["severity"]
        if sev not in SEVERITIES:
            raise _Bad(node.line_of("severity"), "severity is one of info, warning, critical")
        order = node.get("order", 100)
        if isinstance(order, bool) or not isinstance(order, int):
            raise _Bad(node.line_of("order"), "order must be a whole number")
        explains = node.get("explains", [])
        if not isinstance(explains, list) or not all(isinstance(x, str) for x in explains):
            raise _Bad(node.line_of("explains"), "explains: expected a list of rule ids")
        cond = self.cond(node["when"], node.line_of("when"))
        values = self.values(node.get("values"), node.line_of("values"))
        escalate = []
        for item in node.get("escalate") or []:
            if not isinstance(item, LineDict) or item.get("severity") not in SEVERITIES:
                raise _Bad(node.line_of("escalate"), "escalate: items are {severity, when}")
            when = self.cond(item.get("when"), item.line_of("when"))
            escalate.append(Escalation(SEVERITIES[item["severity"]], when))
        evidence = node.get("evidence") or LineDict()
        if not isinstance(evidence, LineDict):
            raise _Bad(node.line_of("evidence"), "evidence: expected a mapping of label: text")
        rows = tuple((str(k), self.template(v, evidence.line_of(k), f"evidence {k!r}"))
                     for k, v in evidence.items())  # fmt: skip
        kv_wall = node.get("kv_wall", False)
        if not isinstance(kv_wall, bool):
            raise _Bad(node.line_of("kv_wall"), "kv_wall is true or false")
        return Rule(
            id=self.rid, title=str(node["title"]), severity=SEVERITIES[sev], order=order,
            when=cond, summary=self.template(node["summary"], node.line_of("summary"), "summary"),
            file=file, line=node.line, description=str(node.get("description", "")).strip(),
            source=str(node.get("source", "")).strip(),
            for_s=parse_duration(node.get("for", 0), node.line_of("for"), "for"),
            keep_firing_for_s=parse_duration(node.get("keep_firing_for", 0),
                                             node.line_of("keep_firing_for"), "keep_firing_for"),
            requires=self.requires(node.get("requires"), node.line_of("requires")),
            decisive=self.decisive(node.get("decisive"), node.line_of("decisive")),
            explains=tuple(explains), kv_wall=kv_wall, values=values, evidence=rows,
            recommend=self.recommend(node.get("recommend"), node.line_of("recommend")),
            escalate=tuple(escalate),
        )  # fmt: skip


@dataclass(slots=True)
class Loaded:
    """What a set of files held: rules by id (later files win), ids switched off, errors."""

    rules: dict[str, Rule] = field(default_factory=dict)
    disabled: set[str] = field(default_factory=set)
    errors: list[RuleError] = field(default_factory=list)

    def merge(self, other: Loaded) -> None:
        for rid in other.disabled:
            self.rules.pop(rid, None)
            self.disabled.add(rid)
        for rid, rule in other.rules.items():
            self.rules[rid] = rule
            self.disabled.discard(rid)
        self.errors.extend(other.errors)


def load_text(text: str, file: str) -> Loaded:
    """Rules from one YAML document: one rule mapping, or `rules:` with a list of them."""
    out = Loaded()
    try:
        doc = load(text)
    except YamlError as exc:
        out.errors.append(RuleError(file, exc.line, _id_near(text, exc.start), str(exc)))
        return out
    if doc is None:
        return out
    if isinstance(doc, LineDict) and "rules" in doc and "id" not in doc:
        items = doc["rules"]
        if not isinstance(items, list):
            out.errors.append(RuleError(file, doc.line_of("rules"), "", "rules: expected a list"))
            return out
    else:
        items = [doc]
    for item in items:
        if not isinstance(item, LineDict):
            out.errors.append(RuleError(file, getattr(doc, "line", 1), "", "a rule is a mapping"))
            continue
        rid = item.get("id")
        if not isinstance(rid, str) or not _ID.match(rid):
            msg = f"id must be lower-case words joined by '-', got {rid!r}"
            out.errors.append(RuleError(file, item.line_of("id"), "", msg))
            continue
        if rid in out.rules or rid in out.disabled:
            out.errors.append(RuleError(file, item.line, rid, "duplicate rule id"))
            continue
        if item.get("enabled", True) is False:
            if set(item) - {"id", "enabled"}:
                msg = "a disabled rule holds only id and enabled"
                out.errors.append(RuleError(file, item.line_of("enabled"), rid, msg))
            out.disabled.add(rid)
            continue
        try:
            out.rules[rid] = _RuleParser(rid).rule(item, file)
        except _Bad as exc:
            out.errors.append(RuleError(file, exc.line, rid, exc.message))
    return out


def _id_near(text: str, line: int) -> str:
    """The rule a YAML syntax error is in, read off the text (the document did not parse):
    the last `id:` at or before `line`, else the first one after it; "" if there is none."""
    ids = [(n, m.group(1)) for n, raw in enumerate(text.splitlines(), 1)
           if (m := _ID_LINE.search(raw))]  # fmt: skip
    before = [rid for n, rid in ids if n <= line]
    return before[-1] if before else (ids[0][1] if ids else "")


def rule_files(paths: Iterable[Path]) -> list[Path]:
    """YAML files named by `paths` (directories are read in name order, not recursively)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(f for f in p.iterdir()
                                if f.suffix in (".yaml", ".yml") and not f.name.startswith(".")
                                and ".test." not in f.name))  # fmt: skip
        else:
            files.append(p)
    return files


def load_paths(paths: Iterable[Path]) -> Loaded:
    """Rules from files and directories; a later file's rule replaces an earlier one's."""
    out = Loaded()
    for f in rule_files(paths):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            out.errors.append(RuleError(str(f), 0, "", f"cannot read: {exc}"))
            continue
        out.merge(load_text(text, str(f)))
    return out


def shipped_dir() -> Path:
    """The rules that come with vtop: `vtop/_rules` in a wheel, `rules/` in a checkout."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_rules"
    return packaged if packaged.is_dir() else here.parent / "rules"


def user_dir() -> Path:
    """`$XDG_CONFIG_HOME/vtop/rules` (or `~/.config/vtop/rules`)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "vtop" / "rules"


def check(loaded: Loaded) -> list[RuleError]:
    """Cross-rule errors: an `explains` naming a rule that does not exist."""
    errors = []
    for rule in loaded.rules.values():
        for other in rule.explains:
            if other not in loaded.rules and other not in loaded.disabled:
                errors.append(RuleError(rule.file, rule.line, rule.id,
                                        f"explains unknown rule {other!r}"))  # fmt: skip
    return errors


def load_catalog(extra: Sequence[Path] = (), *, user: bool = True,
                 shipped: bool = True) -> Loaded:  # fmt: skip
    """Shipped rules, then the user's config directory, then `extra` (--rules), by id."""
    out = Loaded()
    sources: list[Path] = []
    if shipped:
        sources.append(shipped_dir())
    if user and user_dir().is_dir():
        sources.append(user_dir())
    sources.extend(extra)
    for src in sources:
        if not src.exists():
            out.errors.append(RuleError(str(src), 0, "", "no such file or directory"))
            continue
        out.merge(load_paths([src]))
    out.errors.extend(check(out))
    return out
