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

A rule that fails while it is evaluated (over a bound of `vtop.triage.cost` that only the data
could decide, or any error at all) is stopped for the rest of the run and said in one line
(`errors`, and `on_error` as it happens); the other rules go on, so one user rule never takes a
report or the screen down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from vtop import durations
from vtop.knobs import KnobValue
from vtop.model import ALL, EvidencePath, Finding, FindingState, Knob, Recommendation, Severity
from vtop.signals.load import load_change
from vtop.signals.store import Store, key
from vtop.triage import cost, guards
from vtop.triage.expr import Value
from vtop.triage.loader import RuleError, load_catalog
from vtop.triage.measure import Snapshot, holds
from vtop.triage.recommend import Withheld, build, steady
from vtop.triage.schema import Rule
from vtop.triage.template import covered, render, render_value


class ViewLike(Protocol):
    """What the engine reads of an endpoint (`vtop.monitor.EndpointView` is one)."""

    store: Store
    knobs: dict[str, Knob]


MIN_DECISIVE_POLLS = 3
"""The fast path needs at least this many successful polls within its evidence span: one or two
points of a coarse Prometheus backfill, or of a 10 s interval, say nothing about 'every
sample'; the slow path decides those."""
PENDING_GRACE_S = 5.0
"""A condition that lapses for less than this keeps its finding on screen (as pending, its
progress started afresh), so a line does not vanish and come back poll to poll."""
LOAD_WINDOW_S = 300.0
"""How far back a load change is looked for (the longest window a shipped rule reads)."""
HOLD_BACK_S = 30.0
"""A root cause that would fire within this holds back the symptoms it explains."""
NOT_ENOUGH_DATA = "not enough data yet: "
"""How an insufficient finding's summary opens; what follows is what it waits for."""
MAX_GAP_S = 60.0
"""Seconds between two successful polls that count as evidence at most (a paused screen or a
hole in a trace is not evidence)."""


@dataclass(slots=True)
class _State:
    since: float | None = None
    """When the condition began holding (any evidence)."""
    ready_since: float | None = None
    """When the slow path's `for` began: the condition held with the rule's evidence in."""
    firing_since: float | None = None
    last_true: float | None = None
    fast_last: float | None = None
    """The last poll at which the fast path's condition held: within `PENDING_GRACE_S` of it,
    a pending finding still counts down on that path (a rate over a few seconds of warm-up
    polls dips; the time to a verdict should not jump to the slow path's minutes and back)."""
    suspect_since: float | None = None
    """When the rule's `suspect` condition began holding, while it alone holds."""
    advised: dict[str, KnobValue] = field(default_factory=dict)
    """The value each knob was last advised at while firing (kept steady, `recommend.steady`)."""

    def clear(self) -> None:
        self.since = self.ready_since = self.firing_since = self.last_true = self.fast_last = None
        self.advised.clear()


@dataclass(slots=True)
class _Endpoint:
    states: dict[str, _State]
    restart: float | None = None
    evidence_s: float = 0.0
    """Seconds covered by pairs of successful polls since the restart or the first poll."""
    seen_t: float | None = None
    """The last poll counted into `evidence_s`."""
    seen_ok: bool = False
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
        self.stopped: set[str] = set()
        """Rules that failed during an evaluation: skipped from then on (said in `errors`)."""
        self.on_error: Callable[[RuleError], None] | None = None
        """Told of each rule stopped during an evaluation, once, as it happens."""

    @property
    def quickest_s(self) -> float:
        """The least evidence any warning needs to fire (its fast path, else its slow one): a
        window shorter than this cannot have ruled anything out, so it is no all-clear."""
        spans = [
            r.decisive.evidence_s if r.decisive is not None else r.requires.evidence_s + r.for_s
            for r in self.rules
            if r.severity >= Severity.WARNING
        ]
        return min(spans, default=0.0)

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
        change = load_change(store, snap.span(LOAD_WINDOW_S))
        after = (
            None if change is None else Snapshot(store, view.knobs, restart, load_since=change.t)
        )
        findings: list[Finding] = []
        for rule in self.rules:
            if rule.id in self.stopped:
                continue
            try:
                st = ep.states.setdefault(rule.id, _State())
                f = self._step(rule, st, snap, now, evidence, after)
            except cost.CostError as exc:
                self._stop(rule, str(exc))
                continue
            except Exception as exc:  # a user's rule must never take the run down
                self._stop(rule, f"evaluation failed ({type(exc).__name__}: {exc})")
                continue
            if f is not None:
                findings.append(f)
        findings = self._suppress(findings)
        findings = guards.enforce(findings, guards.kv_wall(snap, findings, self.wall_rules))
        rank = {"firing": 0, "pending": 1, "suppressed": 2, "insufficient": 3}
        return sorted(
            findings,
            key=lambda f: (rank.get(f.state, 4), -f.severity, self.by_id[f.rule].order, f.rule),
        )

    def _stop(self, rule: Rule, why: str) -> None:
        """Stop `rule` for the rest of the run and say so once: file:line: rule-id: why."""
        self.stopped.add(rule.id)
        for ep in self._endpoints.values():
            ep.states.pop(rule.id, None)
        err = RuleError(rule.file, rule.line, rule.id, f"stopped: {cost.one_line(why, 200)}")
        self.errors.append(err)
        if self.on_error is not None:
            self.on_error(err)

    # -- one rule ------------------------------------------------------------------------------

    def _step(
        self,
        rule: Rule,
        st: _State,
        snap: Snapshot,
        now: float,
        evidence: _Evidence,
        after: Snapshot | None = None,
    ) -> Finding | None:
        # Recovery thresholds apply once the slow path counts or the rule fires, not while
        # evidence is short: a borderline condition held on the clear levels from its first
        # poll would outlast the evidence it needs and fire on a burst long gone.
        active = st.ready_since is not None or st.firing_since is not None
        main = holds(rule.when, snap, active)
        # Since the load changed (`after`: the windows clamped to the new load), what held
        # under the old load must hold under the new one too: forty clients' preemptions in a
        # 2-minute window say nothing of the four that came after them.
        gone = main is True and after is not None and holds(rule.when, after, active) is False
        if gone:
            main = False
        # A finding's figures are the load it is judged on: the new one, once it changed.
        seen = snap if after is None else after
        fast: bool | None = None
        firing_on_its_window = main is True and st.firing_since is not None
        if rule.decisive is not None and main is not False and not firing_on_its_window:
            fast = holds(rule.decisive.when, snap, active)
        missing = evidence.missing(rule)
        suspected = (
            rule.suspect is not None
            and main is not True
            and fast is not True
            and st.firing_since is None
            and holds(rule.suspect.when, snap, active=False) is True
        )
        if main is True or fast is True:
            if st.since is None:
                st.since = now
            st.last_true = now
            if fast is True:
                st.fast_last = now
            if main is True and not missing:
                if st.ready_since is None:
                    st.ready_since = now
            else:
                st.ready_since = None
            decided = fast is True and evidence.decisive(rule)
            slow = st.ready_since is not None and now - st.ready_since >= rule.for_s
            if st.firing_since is None and (decided or slow):
                st.firing_since = now
        elif (
            not gone
            and st.last_true is not None
            and now - st.last_true
            < (rule.keep_firing_for_s if st.firing_since is not None else PENDING_GRACE_S)
        ):
            st.ready_since = None  # a lapse restarts `for`; what fired stays firing
            suspected = False  # the pending line keeps its progress through the lapse
        elif suspected:
            st.clear()  # a likely cause, not evidence accruing: nothing counts down
            st.since = now if st.suspect_since is None else st.suspect_since
        else:
            st.clear()
        st.suspect_since = st.since if suspected else None
        if st.since is None:
            return None
        if st.firing_since is not None:
            return self._finding(rule, st, seen, now, "firing")
        if suspected:
            assert rule.suspect is not None
            return lacking(
                self._finding(rule, st, seen, now, "insufficient"), (rule.suspect.waits_for,)
            )
        recent_fast = st.fast_last is not None and now - st.fast_last < PENDING_GRACE_S
        needs, path = evidence.needs(rule, st, now, fast is True or recent_fast, main is True)
        if needs is None:
            return lacking(self._finding(rule, st, seen, now, "insufficient"), missing)
        return replace(self._finding(rule, st, seen, now, "pending", needs), path=path)

    def _finding(
        self,
        rule: Rule,
        st: _State,
        snap: Snapshot,
        now: float,
        state: FindingState,
        needs_s: float | None = None,
    ) -> Finding:
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
        times = snap.store.times()
        history = times[-1] - times[0] if len(times) > 1 else 0.0
        evidence = tuple(
            (covered(label, history), covered(render_value(t, names), history))
            for label, t in rule.evidence
        )
        held = now - st.since
        summary = covered(render(rule.summary, names), history)
        if state == "firing" and st.last_true is not None and st.last_true < now:
            summary += (
                f" (Held: its condition cleared {durations.span(now - st.last_true)} ago; a "
                f"finding stays {durations.span(rule.keep_firing_for_s)} against flapping.)"
            )
        if st.firing_since is not None:
            took = st.firing_since - st.since  # the time it took, on whichever path
        else:
            took = held + needs_s if needs_s is not None else rule.for_s
        return Finding(
            rule=rule.id,
            title=rule.title,
            endpoint=snap.store.endpoint,
            severity=severity,
            state=state,
            summary=summary,
            evidence=evidence + tuple(withheld),
            recommendations=recs,
            since=st.since,
            held_s=held,
            for_s=took,
            needs_s=needs_s,
        )

    # -- root causes ------------------------------------------------------------------------------

    def _suppress(self, findings: list[Finding]) -> list[Finding]:
        """A firing root cause suppresses what it explains; one due within `HOLD_BACK_S`
        holds back what it would explain (pending, no advice), so a symptom does not fire
        seconds ahead of the cause that would carry it. A cause further off does not: its
        condition may hold only on the few seconds seen so far (a burst at the cap)."""
        by_rule = {f.rule: f for f in findings}
        for f in sorted(findings, key=lambda f: (self.by_id[f.rule].order, f.rule)):
            current = by_rule[f.rule]
            for other in self.by_id[f.rule].explains:
                g = by_rule.get(other)
                if g is None:
                    continue
                if current.state in ("firing", "suppressed") and g.state in ("firing", "pending"):
                    by_rule[other] = replace(
                        g,
                        state="suppressed",
                        suppressed_by=f.rule,
                        recommendations=(),
                        needs_s=None,
                    )
                elif (
                    current.state == "pending"
                    and g.state == "firing"
                    and current.needs_s is not None
                    and current.needs_s <= HOLD_BACK_S
                ):
                    note = ("held back", f"{f.rule} would explain it; it is judged first")
                    by_rule[other] = replace(
                        g,
                        state="pending",
                        recommendations=(),
                        needs_s=current.needs_s,
                        for_s=g.held_s + current.needs_s,
                        evidence=(*g.evidence, note),
                    )
        return sorted(by_rule.values(), key=lambda f: (self.by_id[f.rule].order, f.rule))


def lacking(finding: Finding, missing: Iterable[str]) -> Finding:
    """`finding` as insufficient for want of `missing`: the fact on its own field, for the
    screens and the report's JSON, and in its summary's words (`NOT_ENOUGH_DATA`), which every
    view that shows a summary prints as it is. One place makes both, so they cannot differ."""
    lacks = tuple(missing)
    return replace(finding, missing=lacks, summary=NOT_ENOUGH_DATA + ", ".join(lacks))


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
    """How much evidence there is since the last restart: seconds covered by pairs of
    successful polls (at any interval: a backfill at a coarse step counts for the span it
    covers), and finished requests.

    Counting from the whole history each evaluation would scan an hour of polls; instead each
    endpoint keeps its running totals and adds the polls that arrived since it last looked.
    """

    def __init__(self, snap: Snapshot, ep: _Endpoint) -> None:
        store = snap.store
        since = ep.seen_t if ep.seen_t is not None else snap.since
        if since is not None and snap.now is not None:
            window = snap.now - since + (1e-6 if ep.seen_t is None else 0.0)
            times = store.times(window)
            ups = store.values(key("up"), window)
            for t, up in zip(times, ups, strict=True):
                if ep.seen_t is not None and t <= ep.seen_t:
                    continue
                if up and ep.seen_ok and ep.seen_t is not None:
                    ep.evidence_s += min(t - ep.seen_t, MAX_GAP_S)
                ep.seen_t, ep.seen_ok = t, bool(up)
        self._store = store
        self.seconds = ep.evidence_s
        finished_key = key("requests_finished", ALL)
        if ep.finished_base is None:
            done = [v for v in store.values(finished_key, snap.span(1e12)) if v is not None]
            ep.finished_base = done[0] if done else None
        last = store.values(finished_key, 1e-9)
        latest = last[-1] if last else None
        base = ep.finished_base
        self.finished = None if latest is None or base is None else latest - base

    def missing(self, rule: Rule) -> list[str]:
        """What the slow path still lacks, in words (empty: its evidence is in)."""
        req = rule.requires
        out = []
        if self.seconds < req.evidence_s:
            out.append(f"{self.seconds:.0f} of {req.evidence_s:.0f} s of evidence")
        if self.short_of_requests(rule):
            out.append(f"{self.finished or 0:.0f} of {req.finished} finished requests")
        return out

    def short_of_requests(self, rule: Rule) -> bool:
        """Whether the slow path waits for requests to finish (not a matter of time)."""
        need = rule.requires.finished
        return bool(need) and (self.finished is None or self.finished < need)

    def decisive(self, rule: Rule) -> bool:
        """Whether the fast path has evidence enough (its condition holding is the caller's):
        its seconds, with at least `MIN_DECISIVE_POLLS` successful polls within them."""
        assert rule.decisive is not None
        span = rule.decisive.evidence_s
        if self.seconds < span:
            return False
        ups = self._store.values(key("up"), span)
        return sum(1 for up in ups if up) >= MIN_DECISIVE_POLLS

    def needs(
        self, rule: Rule, st: _State, now: float, fast: bool, main: bool
    ) -> tuple[float | None, EvidencePath]:
        """Seconds more until the rule fires if what holds now goes on holding, on its
        quicker path, and which path that is; None when that is not a matter of time
        (requests must finish)."""
        etas: list[tuple[float, EvidencePath]] = []
        if fast and rule.decisive is not None:
            etas.append((max(0.0, rule.decisive.evidence_s - self.seconds), "decisive"))
        if main and not self.short_of_requests(rule):
            if st.ready_since is not None:
                etas.append((max(0.0, rule.for_s - (now - st.ready_since)), "borderline"))
            else:
                slow = max(0.0, rule.requires.evidence_s - self.seconds) + rule.for_s
                etas.append((slow, "borderline"))
        if not etas and st.last_true is not None and st.last_true < now:
            etas.append((rule.for_s, "borderline"))  # a lapse within the grace: `for` again
        if not etas:
            return None, ""
        eta, path = min(etas)
        return eta, path
