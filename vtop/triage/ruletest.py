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

A test file is as untrusted as a rule file and as bounded (`vtop.triage.cost`): read only if it
is a regular file of at most 256 KiB, a group runs at most `MAX_TEST_POLLS` polls at an interval
of 10 ms to an hour, a series expands to at most as many samples, and every malformed part is
one `TestFileError` line naming the file and line, never a traceback or a division by zero.

A series with `replica: NAME` belongs to another endpoint serving the same model: each replica
gets its own store, and after every poll the endpoints are compared by the monitor's own code
(`vtop.triage.replicas`) before the endpoint under test is evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

from vtop import knobs
from vtop.model import Finding, Histogram, Knob, Provenance, Scrape, SeriesKey
from vtop.signals.catalog import BY_NAME, Kind
from vtop.signals.store import Store
from vtop.sim.families import TTFT_V1
from vtop.triage import cost, replicas
from vtop.triage.condparse import Bad, parse_duration
from vtop.triage.cost import quote
from vtop.triage.engine import Engine
from vtop.triage.loader import Loaded, load_catalog, read_bounded
from vtop.triage.notation import expand
from vtop.triage.schema import Rule
from vtop.triage.yamlmarks import LineDict, YamlError, load

T0 = 1_000_000.0
SECONDS = TTFT_V1
TOKENS = (
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    50.0,
    100.0,
    200.0,
    500.0,
    1000.0,
    2000.0,
    5000.0,
    10000.0,
    20000.0,
    50000.0,
    100000.0,
)
STEP_TOKENS = (
    1.0,
    8.0,
    16.0,
    32.0,
    64.0,
    128.0,
    256.0,
    512.0,
    1024.0,
    2048.0,
    4096.0,
    8192.0,
    16384.0,
)
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
    if not isinstance(item["series"], str):
        raise TestFileError(
            f"{file}:{line}: series: expected a signal name, got {quote(item['series'])}"
        )
    text = item["series"].strip()
    name, _, rest = text.partition("{")
    label = rest.rstrip("}").split("=", 1)[-1].strip('"') if rest else ""
    engine = "0"
    if rest.startswith("engine="):  # a data-parallel rank: kv_usage{engine="1"}
        engine, label = label, ""
    sig = BY_NAME.get(name)
    if sig is None:
        raise TestFileError(f"{file}:{line}: unknown signal {quote(name)}")
    try:
        values = expand(item["values"])
        per_poll = expand(item["per_poll"]) if "per_poll" in item else None
        if per_poll is not None and len(per_poll) == 1:
            per_poll = per_poll * len(values)
    except ValueError as exc:
        raise TestFileError(f"{file}:{line}: {exc}") from None
    given = item.get("bounds", ())
    if (
        not isinstance(given, list | tuple)
        or len(given) > 100
        or not all(
            isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b)
            for b in given
        )
    ):
        raise TestFileError(f"{file}:{line}: bounds: expected up to 100 finite numbers")
    bounds = tuple(sorted(float(b) for b in given)) or (
        _bounds(name) if sig.kind is Kind.HISTOGRAM else ()
    )
    replica = item.get("replica", "") or ""
    if not isinstance(replica, str) or len(replica) > 64:
        raise TestFileError(f"{file}:{line}: replica: expected a short name")
    if replica == EP:
        raise TestFileError(f"{file}:{line}: replica {quote(EP)} is the endpoint under test")
    return _Series(SeriesKey(name, "m", engine, label), values, per_poll, bounds, replica)


def _knobs(node: object, file: str, line: int) -> dict[str, Knob]:
    out: dict[str, Knob] = {}
    if node is None:
        return out
    if not isinstance(node, LineDict):
        raise TestFileError(f"{file}:{line}: knobs: expected a mapping")
    for name, v in node.items():
        value, provenance = (
            (v.get("value"), v.get("provenance", "flag"))
            if isinstance(v, LineDict)
            else (v, "flag")
        )
        if value is not None and not isinstance(value, str | int | float | bool):
            raise TestFileError(
                f"{file}:{node.line_of(name)}: knobs: {name}: expected a "
                f"number, true/false or text, got {quote(value)}"
            )
        if provenance not in get_args(Provenance):
            raise TestFileError(
                f"{file}:{node.line_of(name)}: knobs: {name}: provenance is one "
                f"of {', '.join(get_args(Provenance))}"
            )
        if provenance == "flag" and value is not None:  # as a user types it: within its range
            try:
                knobs.check(name, value)
            except ValueError as exc:
                raise TestFileError(f"{file}:{node.line_of(name)}: knobs: {exc}") from None
        out[name] = Knob(name, value, cast(Provenance, provenance), "rule test")
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
                hists[s.key] = Histogram(
                    s.bounds, tuple(state[: len(s.bounds)]), state[-2], state[-1]
                )
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
            scrapes.append(
                Scrape(ep, t, latency_s=latency, size_bytes=1000, scalars=scalars, histograms=hists)
            )
    return scrapes


@dataclass(slots=True)
class _View:
    store: Store
    knobs: dict[str, Knob]


def _times(value: object, file: str, line: int) -> tuple[float, float]:
    text = str(value) if isinstance(value, str | int | float) else ""
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
        return f"expected the summary to contain {quote(text)}: {actual.summary}"
    return None


def _rules_for(doc: LineDict, path: Path) -> Loaded:
    files = doc.get("rule_files") or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise TestFileError(
            f"{path}:{doc.line_of('rule_files')}: rule_files: expected a list of paths"
        )
    loaded = load_catalog([path.parent / f for f in files], user=False)
    if loaded.errors:
        raise TestFileError(
            f"{path}:{doc.line_of('rule_files')}: rules do not load: "
            + "; ".join(str(e) for e in loaded.errors)
        )
    return loaded


def run_group(
    group: LineDict, rules: Sequence[Rule], file: str, default_interval: float
) -> Outcome:
    """Run one test group; every failure is one line with the file, line and time."""
    name = cost.one_line(str(group.get("name", f"line {group.line}")), 120)
    out = Outcome(file, name)
    interval = _interval(group.get("interval", default_interval), file, group.line_of("interval"))
    series = [
        _parse_series(s, file, group.line_of("input_series"))
        for s in _list(group, "input_series", file)
    ]
    checks = []
    for item in _list(group, "finding_tests", file):
        if not isinstance(item, LineDict) or "rule" not in item or "eval_time" not in item:
            raise TestFileError(f"{file}:{group.line}: finding_tests items need rule, eval_time")
        lo, hi = _times(item["eval_time"], file, item.line_of("eval_time"))
        if hi < lo:
            raise TestFileError(
                f"{file}:{item.line_of('eval_time')}: eval_time ends before it starts"
            )
        exp = _expectations(item, file)
        checks.append((lo, hi, str(item["rule"]), exp, item.line))
    ids = {r.id for r in rules}
    for _, _, rid, _, line in checks:
        if rid not in ids:
            raise TestFileError(f"{file}:{line}: {name}: no rule {quote(rid)} is loaded")
    end = max((hi for _, hi, *_ in checks), default=0.0)
    n = math.floor(end / interval + 1e-9) + 1
    if n > cost.MAX_TEST_POLLS:
        raise TestFileError(
            f"{file}:{group.line}: {name}: {n} polls to run, at most "
            f"{cost.MAX_TEST_POLLS} (a later eval_time or a longer interval "
            "than the test needs)"
        )
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
        doc = load(read_bounded(path))
    except YamlError as exc:
        raise TestFileError(f"{file}:{exc.line}: {exc}") from None
    except OSError as exc:
        raise TestFileError(f"{file}:0: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise TestFileError(f"{file}:0: cannot read: {exc}") from None
    if not isinstance(doc, LineDict) or not isinstance(doc.get("tests"), list):
        raise TestFileError(f"{file}:1: a rule test file has a `tests:` list")
    rules = list(_rules_for(doc, path).rules.values())
    interval = _interval(doc.get("interval", 1), file, doc.line_of("interval"))
    groups = doc["tests"]
    if not all(isinstance(g, LineDict) for g in groups):
        raise TestFileError(f"{file}:{doc.line_of('tests')}: every test is a mapping")
    total = sum(_polls(g, file, interval) for g in groups)
    if total > cost.MAX_TEST_FILE_POLLS:
        raise TestFileError(
            f"{file}:{doc.line_of('tests')}: its groups would run {total} polls "
            f"together, at most {cost.MAX_TEST_FILE_POLLS}"
        )
    return [run_group(g, rules, file, interval) for g in groups]


def _polls(group: LineDict, file: str, default_interval: float) -> int:
    """Polls `run_group` will run for `group` (its latest eval_time over its interval), read
    before any runs; what `run_group` would refuse is left for it to say."""
    try:
        interval = _interval(
            group.get("interval", default_interval), file, group.line_of("interval")
        )
        ends = [
            _times(item["eval_time"], file, item.line_of("eval_time"))[1]
            for item in _list(group, "finding_tests", file)
            if isinstance(item, LineDict) and "eval_time" in item
        ]
    except TestFileError:
        return 0
    n = math.floor(max(ends, default=0.0) / interval + 1e-9) + 1
    return n if n <= cost.MAX_TEST_POLLS else 0  # `run_group` says that one


def _interval(value: object, file: str, line: int) -> float:
    """A poll interval: 10 ms to an hour (0 would divide by zero, 1 ns run forever)."""
    try:
        seconds = parse_duration(value, line, "interval")
    except Bad as exc:
        raise TestFileError(f"{file}:{line}: {exc.message}") from None
    if not cost.MIN_TEST_INTERVAL_S <= seconds <= cost.MAX_TEST_INTERVAL_S:
        raise TestFileError(f"{file}:{line}: interval: from 10ms to 1h, got {quote(value)}")
    return seconds


def _list(node: LineDict, key: str, file: str) -> list[Any]:
    value = node.get(key) or []
    if not isinstance(value, list):
        raise TestFileError(f"{file}:{node.line_of(key)}: {key}: expected a list")
    return value


_EXPECTATION_MAPS = ("recommend", "direction", "confidence")


def _expectations(item: LineDict, file: str) -> list[Any]:
    """`exp_findings`: empty (must not fire) or a list of mappings, whose `recommend`,
    `direction` and `confidence` are mappings of knob to value."""
    exp = _list(item, "exp_findings", file)
    line = item.line_of("exp_findings")
    for want in exp:
        if not isinstance(want, LineDict):
            raise TestFileError(f"{file}:{line}: exp_findings: every item is a mapping")
        for key in _EXPECTATION_MAPS:
            if want.get(key) is not None and not isinstance(want[key], LineDict):
                raise TestFileError(
                    f"{file}:{want.line_of(key)}: {key}: expected a mapping of knob: value"
                )
    return exp


def test_files(paths: Sequence[Path]) -> list[Path]:
    """`*.test.yaml` files named by `paths` (directories are searched, not recursively)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(p.glob("*.test.yaml")))
        else:
            out.append(p)
    return out
