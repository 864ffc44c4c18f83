"""`vtop rules test`: rule unit tests in the style of `promtool test rules`.

A test file runs against the shipped catalog (so explanations and guards act as they do
live), with its `rule_files` loaded over it by id as `--rules` would. Each test group gives
knobs (the context), input series in expanding notation (`{series: kv_usage, values:
"0.95x600"}`) and the expected findings of one rule at evaluation times. An empty expectation
means "must not fire". An `eval_time` may be a range (`2m..10m`): the
expectation must hold at every poll in it, which is how "does not flap" is written.

Series are fed to a real `Store` as `Scrape`s, one per poll, and the real `Engine` evaluates
every poll (its state machine needs the whole history), so a rule test exercises exactly the
code the monitor runs. Histograms are written as observations per poll:
`{series: ttft, values: "0.3x600", per_poll: 2}` adds two observations of 0.3 s each poll.

A series with `replica: NAME` belongs to another endpoint serving the same model: each replica
gets its own store, and after every poll the endpoints are compared by the monitor's own code
(`vtop.triage.replicas`) before the endpoint under test is evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vtop.model import Finding, Histogram, Knob, Scrape, SeriesKey
from vtop.signals.catalog import BY_NAME, Kind
from vtop.signals.store import Store
from vtop.triage import replicas
from vtop.triage.condparse import parse_duration
from vtop.triage.engine import Engine
from vtop.triage.loader import Loaded, load_catalog
from vtop.triage.notation import expand
from vtop.triage.schema import Rule
from vtop.triage.yamlmarks import LineDict, YamlError, load

T0 = 1_000_000.0
SECONDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
           7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
TOKENS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
          10000.0, 20000.0, 50000.0, 100000.0)  # fmt: skip
STEP_TOKENS = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
               8192.0, 16384.0)  # fmt: skip
EP = "rule-test"


class TestFileError(ValueError):
    """A test file that cannot be read; the message starts with file:line."""


@dataclass(slots=True)
class Outcome:
    file: str
    name: str
    failures: list[str] = field(default_factory=list)
    evals: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures


def _bounds(signal: str) -> tuple[float, ...]:
    if signal == "iteration_tokens":
        return STEP_TOKENS
    return SECONDS if BY_NAME[signal].unit == "seconds" else TOKENS


@dataclass(slots=True)
class _Series:
    key: SeriesKey
    values: list[float | None]
    per_poll: list[float | None] | None = None
    bounds: tuple[float, ...] = ()
    replica: str = ""
    """Another endpoint serving the same model ("": the endpoint under test)."""


def _parse_series(item: object, file: str, line: int) -> _Series:
    if not isinstance(item, LineDict) or "series" not in item or "values" not in item:
        raise TestFileError(f"{file}:{line}: input_series items are {{series, values}}")
    line = item.line
    text = str(item["series"]).strip()
    name, _, rest = text.partition("{")
    label = rest.rstrip("}").split("=", 1)[-1].strip('"') if rest else ""
    engine = "0"
    if rest.startswith("engine="):  # a data-parallel rank: kv_usage{engine="1"}
        engine, label = label, ""
    sig = BY_NAME.get(name)
    if sig is None:
        raise TestFileError(f"{file}:{line}: unknown signal {name!r}")
    try:
        values = expand(item["values"])
        per_poll = expand(item["per_poll"]) if "per_poll" in item else None
        if per_poll is not None and len(per_poll) == 1:
            per_poll = per_poll * len(values)
    except ValueError as exc:
        raise TestFileError(f"{file}:{line}: {exc}") from None
    bounds = tuple(float(b) for b in item.get("bounds", ())) or (
        _bounds(name) if sig.kind is Kind.HISTOGRAM else ()
    )
    replica = str(item.get("replica", "") or "")
    if replica == EP:
        raise TestFileError(f"{file}:{line}: replica {EP!r} is the endpoint under test")
    return _Series(SeriesKey(name, "m", engine, label), values, per_poll, bounds, replica)


def _knobs(node: object, file: str, line: int) -> dict[str, Knob]:
    out: dict[str, Knob] = {}
    if node is None:
        return out
    if not isinstance(node, LineDict):
        raise TestFileError(f"{file}:{line}: knobs: expected a mapping")
    for name, v in node.items():
        if isinstance(v, LineDict):
            out[name] = Knob(name, v.get("value"), v.get("provenance", "flag"), "rule test")
        else:
            out[name] = Knob(name, v, "flag", "rule test")
    return out


def _scrapes(series: Sequence[_Series], n: int, interval: float, ep: str = EP) -> list[Scrape]:
    hist_state: dict[SeriesKey, list[float]] = {}
    scrapes = []
    for i in range(n):
        t = T0 + i * interval
        scalars: dict[SeriesKey, float] = {}
        hists: dict[SeriesKey, Histogram] = {}
        latency = 0.01
        up = True
        for s in series:
            v = s.values[i] if i < len(s.values) else None
            sig = BY_NAME[s.key.signal]
            if sig.kind is Kind.HISTOGRAM:
                state = hist_state.setdefault(s.key, [0.0] * (len(s.bounds) + 2))
                count = s.per_poll[i] if s.per_poll and i < len(s.per_poll) else 1.0
                if v is not None and count:
                    for j, b in enumerate(s.bounds):
                        if v <= b:
                            state[j] += count
                    state[-2] += count
                    state[-1] += count * v
                hists[s.key] = Histogram(s.bounds, tuple(state[: len(s.bounds)]), state[-2],
                                         state[-1])  # fmt: skip
            elif v is None:
                continue
            elif s.key.signal == "scrape_latency":
                latency = v
            elif s.key.signal == "up":
                up = v > 0
            else:
                scalars[s.key] = v
        if not up:
            scrapes.append(Scrape(ep, t, latency_s=latency, error="test: down"))
        else:
            scrapes.append(Scrape(ep, t, latency_s=latency, size_bytes=1000, scalars=scalars,
                                  histograms=hists))  # fmt: skip
    return scrapes


@dataclass(slots=True)
class _View:
    store: Store
    knobs: dict[str, Knob]


def _times(value: object, file: str, line: int) -> tuple[float, float]:
    text = str(value)
    try:
        if ".." in text:
            a, b = text.split("..", 1)
            return parse_duration(a, line, "eval_time"), parse_duration(b, line, "eval_time")
        t = parse_duration(value, line, "eval_time")
    except Exception as exc:
        raise TestFileError(f"{file}:{line}: {exc}") from None
    return t, t


def _check(exp: list[Any], actual: Finding | None) -> str | None:
    """Why `actual` does not meet the expectation, or None when it does."""
    if not exp:
        if actual is not None and actual.state == "firing":
            return f"expected no firing finding, got firing: {actual.summary}"
        return None
    want = exp[0]
    state = want.get("state", "firing")
    if actual is None:
        return f"expected {state}, got nothing"
    if actual.state != state:
        extra = f" by {actual.suppressed_by}" if actual.suppressed_by else ""
        return f"expected {state}, got {actual.state}{extra} ({actual.summary})"
    if "severity" in want and actual.severity.name.lower() != str(want["severity"]):
        return f"expected severity {want['severity']}, got {actual.severity.name.lower()}"
    if "suppressed_by" in want and actual.suppressed_by != want["suppressed_by"]:
        return f"expected suppressed by {want['suppressed_by']}, got {actual.suppressed_by}"
    recs = {r.knob: r for r in actual.recommendations}
    for knob, value in (want.get("recommend") or {}).items():
        rec = recs.get(knob)
        if value is None:
            if rec is not None:
                return f"expected no advice on {knob}, got {rec.flag}"
            continue
        if rec is None:
            got = ", ".join(r.flag for r in actual.recommendations) or "none"
            return f"expected advice on {knob}, got {got}"
        got_v = rec.new_value
        if isinstance(value, float) and isinstance(got_v, float):
            ok = math.isclose(got_v, value, rel_tol=1e-6)
        else:
            ok = got_v == value
        if not ok:
            return f"expected {knob} = {value}, got {rec.new_value} ({rec.formula})"
    for knob, direction in (want.get("direction") or {}).items():
        rec = recs.get(knob)
        if rec is None or rec.direction != direction:
            return f"expected {direction} {knob}, got {rec.direction if rec else 'nothing'}"
    for knob, level in (want.get("confidence") or {}).items():
        rec = recs.get(knob)
        if rec is None or rec.confidence != level:
            return f"expected {level} confidence on {knob}, got {rec.confidence if rec else None}"
    text = want.get("summary_contains")
    if text is not None and str(text) not in actual.summary:
        return f"expected the summary to contain {text!r}: {actual.summary}"
    return None


def _rules_for(doc: LineDict, path: Path) -> Loaded:
    files = doc.get("rule_files") or []
    loaded = load_catalog([path.parent / f for f in files], user=False)
    if loaded.errors:
        raise TestFileError(f"{path}:{doc.line_of('rule_files')}: rules do not load: "
                            + "; ".join(str(e) for e in loaded.errors))  # fmt: skip
    return loaded


def run_group(group: LineDict, rules: Sequence[Rule], file: str, default_interval: float
              ) -> Outcome:  # fmt: skip
    """Run one test group; every failure is one line with the file, line and time."""
    name = str(group.get("name", f"line {group.line}"))
    out = Outcome(file, name)
    interval = parse_duration(group.get("interval", default_interval),
                              group.line_of("interval"), "interval")  # fmt: skip
    series = [_parse_series(s, file, group.line_of("input_series"))
              for s in group.get("input_series") or []]  # fmt: skip
    checks = []
    for item in group.get("finding_tests") or []:
        if not isinstance(item, LineDict) or "rule" not in item or "eval_time" not in item:
            raise TestFileError(f"{file}:{group.line}: finding_tests items need rule, eval_time")
        lo, hi = _times(item["eval_time"], file, item.line_of("eval_time"))
        exp = item.get("exp_findings") or []
        checks.append((lo, hi, str(item["rule"]), list(exp), item.line))
    ids = {r.id for r in rules}
    for _, _, rid, _, line in checks:
        if rid not in ids:
            raise TestFileError(f"{file}:{line}: {name}: no rule {rid!r} is loaded")
    end = max((hi for _, hi, *_ in checks), default=0.0)
    n = math.floor(end / interval + 1e-9) + 1
    view = _View(Store(EP, capacity=max(n, 3600)), _knobs(group.get("knobs"), file, group.line))
    peers = {s.replica: Store(s.replica, capacity=max(n, 3600)) for s in series if s.replica}
    peer_scrapes = {
        name: _scrapes([s for s in series if s.replica == name], n, interval, name)
        for name in peers
    }
    engine = Engine(rules)
    reported: set[int] = set()
    mine = [s for s in series if not s.replica]
    for i, scrape in enumerate(_scrapes(mine, n, interval)):
        view.store.ingest(scrape)
        if peers:
            members = [replicas.Member(EP, ("m",), view.store, scrape.ok)]
            for name, store in peers.items():
                peer = peer_scrapes[name][i]
                store.ingest(peer)
                members.append(replicas.Member(name, ("m",), store, peer.ok))
            replicas.update(members, {EP: view.store})
        findings = engine.evaluate(view)
        t = i * interval
        for lo, hi, rid, exp, line in checks:
            if not lo - 1e-9 <= t <= hi + 1e-9 or line in reported:
                continue
            if lo == hi and abs(t - lo) > interval / 2 + 1e-9:
                continue
            out.evals += 1
            actual = next((f for f in findings if f.rule == rid), None)
            why = _check(exp, actual)
            if why is not None:
                reported.add(line)
                out.failures.append(f"{file}:{line}: {name}: at {t:g} s: {rid}: {why}")
    return out


def run_file(path: Path) -> list[Outcome]:
    """Run every group of one test file."""
    file = str(path)
    try:
        doc = load(path.read_text(encoding="utf-8"))
    except YamlError as exc:
        raise TestFileError(f"{file}:{exc.line}: {exc}") from None
    except OSError as exc:
        raise TestFileError(f"{file}:0: cannot read: {exc}") from None
    if not isinstance(doc, LineDict) or not isinstance(doc.get("tests"), list):
        raise TestFileError(f"{file}:1: a rule test file has a `tests:` list")
    rules = list(_rules_for(doc, path).rules.values())
    interval = parse_duration(doc.get("interval", 1), doc.line_of("interval"), "interval")
    return [run_group(g, rules, file, interval) for g in doc["tests"]]


def test_files(paths: Sequence[Path]) -> list[Path]:
    """`*.test.yaml` files named by `paths` (directories are searched, not recursively)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(p.glob("*.test.yaml")))
        else:
            out.append(p)
    return out
