"""The engine: rules over one endpoint's store, with Prometheus alerting semantics.

Each rule of each endpoint is a small state machine, as in Prometheus: pending while its
condition holds, firing once it has held for `for`, and kept firing for `keep_firing_for`
after it stops holding, so a signal that wobbles around a threshold does not flap. While a rule
is pending or firing its comparisons use their recovery thresholds (Grafana: fire above X,
clear only below Y). A rule may not speak before its evidence is in (polls, uptime, finished
requests since the last restart); while its condition holds without that evidence it says
"not enough data" and how far along it is, rather than staying silent or guessing.

Then root causes are applied in order: a firing rule suppresses the rules it `explains`, which
say by whom instead of giving advice, and the guarantees of `guards` run last. A server restart
resets every state of that endpoint: the configuration the user just applied starts afresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from vtop.model import ALL, Finding, FindingState, Knob, KnobValue, Recommendation, Severity
from vtop.signals.store import Store, key
from vtop.triage import guards
from vtop.triage.expr import Value
from vtop.triage.loader import RuleError, load_catalog
from vtop.triage.measure import Snapshot, holds
from vtop.triage.recommend import Withheld, build, steady
from vtop.triage.schema import Rule
from vtop.triage.template import render


class ViewLike(Protocol):
    """What the engine reads of an endpoint (`vtop.monitor.EndpointView` is one)."""

    store: Store
    knobs: dict[str, Knob]


@dataclass(slots=True)
class _State:
    since: float | None = None
    firing_since: float | None = None
    last_true: float | None = None
    advised: dict[str, KnobValue] = field(default_factory=dict)
    """The value each knob was last advised at while firing (kept steady, `recommend.steady`)."""


@dataclass(slots=True)
class _Endpoint:
    states: dict[str, _State]
    restart: float | None = None
    ok_base: int | None = None
    finished_base: float | None = None


class Engine:
    """Evaluates a rule catalog over endpoints; keeps per-endpoint state between calls."""

    def __init__(self, rules: Iterable[Rule], errors: Iterable[RuleError] = ()) -> None:
        self.errors = list(errors)
        """Rule files that did not load (each one line); the other rules still run."""
        self.rules = sorted(rules, key=lambda r: (r.order, r.id))
        self.by_id = {r.id: r for r in self.rules}
        self.wall_rules = {r.id for r in self.rules if r.kv_wall}
        self._endpoints: dict[str, _Endpoint] = {}

    @classmethod
    def from_catalog(cls, extra: Sequence[Path] = (), *, user: bool = True) -> Engine:
        """The shipped rules, overridden by the user's directory and `extra` (--rules)."""
        loaded = load_catalog(extra, user=user)
        return cls(loaded.rules.values(), loaded.errors)

    def reset(self, endpoint: str | None = None) -> None:
        """Forget rule states (of one endpoint, or all)."""
        if endpoint is None:
            self._endpoints.clear()
        else:
            self._endpoints.pop(endpoint, None)

    def evaluate(self, view: ViewLike) -> list[Finding]:
        """Findings for the endpoint now: firing first, then by severity and root-cause order."""
        store = view.store
        now = store.now
        if now is None:
            return []
        restarts = store.restarts()
        restart = restarts[-1] if restarts else None
        ep = self._endpoints.get(store.endpoint)
        if ep is None or ep.restart != restart:
            ep = self._endpoints[store.endpoint] = _Endpoint({}, restart)
        snap = Snapshot(store, view.knobs, restart)
        evidence = _Evidence(snap, ep)
        findings: list[Finding] = []
        for rule in self.rules:
            f = self._step(rule, ep.states.setdefault(rule.id, _State()), snap, now, evidence)
            if f is not None:
                findings.append(f)
        findings = self._suppress(findings)
        findings = guards.enforce(findings, guards.kv_wall(snap, findings, self.wall_rules))
        rank = {"firing": 0, "pending": 1, "suppressed": 2, "insufficient": 3}
        return sorted(findings, key=lambda f: (rank.get(f.state, 4), -f.severity,
                                               self.by_id[f.rule].order, f.rule))  # fmt: skip

    # -- one rule ------------------------------------------------------------------------------

    def _step(self, rule: Rule, st: _State, snap: Snapshot, now: float,
              evidence: _Evidence) -> Finding | None:  # fmt: skip
        missing = evidence.missing(rule)
        truth = holds(rule.when, snap, active=st.since is not None)
        if truth and not missing:
            if st.since is None:
                st.since = now
            st.last_true = now
            if st.firing_since is None and now - st.since >= rule.for_s:
                st.firing_since = now
        elif not (
            st.firing_since is not None
            and st.last_true is not None
            and now - st.last_true < rule.keep_firing_for_s
        ):
            st.since = st.firing_since = st.last_true = None
            st.advised.clear()
        if st.since is None:
            if truth and missing:
                return Finding(rule=rule.id, title=rule.title, endpoint=snap.store.endpoint,
                               severity=Severity.OK, state="insufficient",
                               summary="not enough data yet: " + ", ".join(missing),
                               for_s=rule.for_s)  # fmt: skip
            return None
        state: FindingState = "firing" if st.firing_since is not None else "pending"
        return self._finding(rule, st, snap, now, state)

    def _finding(self, rule: Rule, st: _State, snap: Snapshot, now: float,
                 state: FindingState) -> Finding:  # fmt: skip
        values: dict[str, Value] = {}
        for d in rule.values:
            if d.measure is not None:
                values[d.name] = snap.measure(d.measure)
            elif d.expr is not None:
                values[d.name] = d.expr.eval(snap.names(d.expr, values))
        names = _NameView(values, snap)
        severity = rule.severity
        recs: tuple[Recommendation, ...] = ()
        withheld: list[tuple[str, str]] = []
        if state == "firing":
            for esc in rule.escalate:
                if esc.severity > severity and holds(esc.when, snap, active=False):
                    severity = esc.severity
            defs = {d.name: d for d in rule.values}
            built = [build(spec, values, defs, snap) for spec in rule.recommend]
            recs = tuple(
                steady(r, st.advised[r.knob]) if r.knob in st.advised else r
                for r in built
                if isinstance(r, Recommendation)
            )
            st.advised = {r.knob: r.new_value for r in recs}
            withheld = [("withheld", w.note) for w in built if isinstance(w, Withheld)]
        assert st.since is not None
        evidence = tuple((label, render(t, names)) for label, t in rule.evidence)
        return Finding(
            rule=rule.id, title=rule.title, endpoint=snap.store.endpoint, severity=severity,
            state=state, summary=render(rule.summary, names), evidence=evidence + tuple(withheld),
            recommendations=recs, since=st.since, held_s=now - st.since, for_s=rule.for_s,
        )  # fmt: skip

    # -- root causes ------------------------------------------------------------------------------

    def _suppress(self, findings: list[Finding]) -> list[Finding]:
        by_rule = {f.rule: f for f in findings}
        for f in sorted(findings, key=lambda f: (self.by_id[f.rule].order, f.rule)):
            current = by_rule[f.rule]
            if current.state not in ("firing", "suppressed"):
                continue
            for other in self.by_id[f.rule].explains:
                g = by_rule.get(other)
                if g is not None and g.state in ("firing", "pending"):
                    by_rule[other] = replace(g, state="suppressed", suppressed_by=f.rule,
                                             recommendations=())  # fmt: skip
        return sorted(by_rule.values(), key=lambda f: (self.by_id[f.rule].order, f.rule))


class _NameView(Mapping[str, Value]):
    """Rule values first, then knobs and context values (resolved on first use)."""

    def __init__(self, values: Mapping[str, Value], snap: Snapshot) -> None:
        self._vals = values
        self._snap = snap

    def __getitem__(self, name: str) -> Value:
        if name in self._vals:
            return self._vals[name]
        return self._snap.resolve(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._vals)

    def __len__(self) -> int:
        return len(self._vals)


class _Evidence:
    """How much history there is since the last restart: polls, seconds, finished requests.

    Counting from the whole history each evaluation would scan an hour of polls; instead the
    baselines at the restart (or the first evaluation) are found once and kept per endpoint.
    """

    def __init__(self, snap: Snapshot, ep: _Endpoint) -> None:
        store = snap.store
        ok_total = store.polls - store.failed_polls
        if ep.ok_base is None:
            span = snap.span(1e12)
            ok_since = sum(1 for v in store.values(key("up"), span) if v)
            ep.ok_base = ok_total - ok_since
        self.polls = ok_total - ep.ok_base
        self.uptime_s = snap.uptime_s
        finished_key = key("requests_finished", ALL)
        if ep.finished_base is None:
            done = [v for v in store.values(finished_key, snap.span(1e12)) if v is not None]
            ep.finished_base = done[0] if done else None
        last = store.values(finished_key, 1e-9)
        latest = last[-1] if last else None
        base = ep.finished_base
        self.finished = None if latest is None or base is None else latest - base

    def missing(self, rule: Rule) -> list[str]:
        req = rule.requires
        out = []
        if self.polls < req.samples:
            out.append(f"{self.polls} of {req.samples} polls")
        if self.uptime_s < req.uptime_s:
            out.append(f"{self.uptime_s:.0f} of {req.uptime_s:.0f} s of history")
        if req.finished and (self.finished is None or self.finished < req.finished):
            out.append(f"{self.finished or 0:.0f} of {req.finished} finished requests")
        return out
