"""One compact row per endpoint, for `vtop --url A --url B …`, and one per engine under it
for data parallelism (no Textual here).

Each row carries what tells endpoints apart at a glance: the connection, running against the
cap, the queue, KV usage, preemptions/s, generation throughput, TTFT p99 and the worst firing
finding; while none fires, the likely cause (`likely Scheduler budget too small`, as the
triage panel picks it, `verdict.likely`) rather than "OK", which only a row where no rule's
condition holds at warning level says. An endpoint with several engines (data parallelism:
series told apart by their `engine` label) gets a sub-row per engine with the same figures,
since one engine stuck at its KV ceiling hides in an endpoint's sum. The panels below show
the selected endpoint.

The figures are `vtop.figures`' (`now`, the cap), the same the panels and `--once` read, as
cells, not one string: the widget shows the columns that fit and leaves out
the least important first (`DROP_ORDER`), so 80 columns get fewer columns, never a wrap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop import figures as figs
from vtop import fmt
from vtop.model import ALL, Finding, Severity
from vtop.monitor import EndpointView
from vtop.signals.store import Store
from vtop.sources.status import ConnectionStatus
from vtop.ui.headline import short_url
from vtop.ui.verdict import LABELS, judging, likely, order


@dataclass(frozen=True, slots=True)
class Column:
    id: str
    header: str
    width: int


COLUMNS = (
    Column("run", "run", 8),
    Column("wait", "wait", 5),
    Column("kv", "KV", 6),
    Column("pre", "pre/s", 5),
    Column("gen", "tok/s", 5),
    Column("ttft", "TTFT99", 6),
)
"""Widths fit the values `fmt` writes (`1.23k`, `98.7%`, `38.4s`, `475ms`)."""
DROP_ORDER = ("pre", "ttft", "gen", "wait")
"""Left out first when the row is too narrow: preemptions follow KV usage (which stays), then
latency and throughput; running against its cap and KV usage always stay. The verdict reads
whole before any of them stays (in its short form where its full one would take a column)."""


@dataclass(frozen=True, slots=True)
class EngineRow:
    """One engine of a data-parallel endpoint."""

    name: str
    cells: dict[str, str]


@dataclass(frozen=True, slots=True)
class Row:
    endpoint: str
    name: str
    up: bool
    cells: dict[str, str]
    verdict: str
    severity: Severity
    engines: tuple[EngineRow, ...] = ()
    likely: bool = False
    """The verdict is a likely cause whose evidence is still accruing, not a firing finding
    (drawn apart from one)."""
    short: str = ""
    """The verdict in fewer words, for a narrow row: the rule's id for its title
    (`CRIT memory-ceiling`), the connection's state without its detail (`reconnecting`)."""

    @property
    def verdicts(self) -> tuple[str, ...]:
        """The verdict's forms, longest first (`room.fitting` picks one)."""
        return (self.verdict, self.short) if self.short else (self.verdict,)


def cap_text(cap: figs.Cap | None) -> str:
    """`/256` after the running count: the cap as the integer it is (`fmt.num` would shorten
    1024 to `1.02k`), or as `fmt.num` writes a fractional one."""
    if cap is None:
        return ""
    value = cap.value
    return "/" + (str(int(value)) if value == int(value) else fmt.num(value))


def cells(
    store: Store,
    cap: figs.Cap | None,
    model: str = ALL,
    engine: str = ALL,
    rate_span_s: float = figs.DEFAULT_RATE_SPAN_S,
) -> dict[str, str]:
    """The figures of one endpoint (`model`, `engine` ALL) or of one of its engines."""
    now = figs.now(
        store,
        figs.Scope(model, engine),
        rate_span_s=rate_span_s,
        latency_span_s=figs.LATENCY_SPAN_S,
    )
    return {
        "run": fmt.num(now.running) + cap_text(cap),
        "wait": fmt.num(now.waiting),
        "kv": fmt.pct(now.kv_usage),
        "pre": fmt.num(now.preemptions_per_s),
        "gen": fmt.num(now.generation_tokens_per_s),
        "ttft": fmt.seconds(now.ttft_p99),
    }


def engine_rows(
    store: Store, cap: figs.Cap | None, rate_span_s: float = figs.DEFAULT_RATE_SPAN_S
) -> tuple[EngineRow, ...]:
    """A sub-row per engine when there are several (one engine is the endpoint's own row)."""
    pairs = store.engines()
    if len(pairs) < 2:
        return ()
    models = {m for m, _ in pairs}
    out = []
    for model, engine in pairs:
        name = f"engine {engine or '–'}"
        if len(models) > 1:
            name = f"{model.rsplit('/', 1)[-1]} · {name}"
        out.append(EngineRow(name, cells(store, cap, model, engine, rate_span_s)))
    return tuple(out)


def watched(store: Store) -> float:
    """Seconds of history the store holds since the endpoint's last restart."""
    times = store.times()
    restarts = store.restarts()
    start = max(times[0], restarts[-1]) if times and restarts else (times[0] if times else 0.0)
    return times[-1] - start if times else 0.0


def row(
    view: EndpointView,
    findings: Sequence[Finding] | None,
    status: ConnectionStatus,
    rate_span_s: float = figs.DEFAULT_RATE_SPAN_S,
    quickest_s: float = 0.0,
) -> Row:
    s = view.store
    cap = figs.cap(view.knobs)
    firing = [f for f in order(findings or ()) if f.state == "firing"]
    cause = likely(findings)
    up = status.healthy
    short = ""
    if not up:
        verdict, sev = status.text, Severity.CRITICAL
        short = status.state
    elif firing:
        worst = firing[0]
        more = f" (+{len(firing) - 1})" if len(firing) > 1 else ""
        verdict, sev = f"{LABELS[worst.severity]} {worst.title or worst.rule}{more}", worst.severity
        short = f"{LABELS[worst.severity]} {worst.rule}{more}"
    elif cause is not None:
        verdict, sev = f"likely {cause.title or cause.rule}", cause.severity
        short = f"likely {cause.rule}"
    elif judging(seen := watched(s), quickest_s) is not None:
        verdict, sev = f"judging {seen:.0f} of {quickest_s:.0f} s", Severity.OK
    else:
        verdict, sev = "OK", Severity.OK
    return Row(
        s.endpoint,
        short_url(s.endpoint),
        up,
        cells(s, cap, rate_span_s=rate_span_s),
        verdict,
        sev,
        engine_rows(s, cap, rate_span_s),
        likely=up and cause is not None,
        short=short if short and len(short) < len(verdict) else "",
    )


def visible(width: int) -> list[Column]:
    """The columns that fit in `width` cells (a space after each), least important left out
    first."""
    shown = list(COLUMNS)
    for drop in (None, *DROP_ORDER):
        shown = [c for c in shown if c.id != drop]
        if sum(c.width + 1 for c in shown) <= width:
            return shown
    return []


def figures(values: dict[str, str], columns: Sequence[Column]) -> str:
    """The cells of `columns`, right-aligned in their widths, a space apart."""
    return " ".join(values.get(c.id, fmt.DASH).rjust(c.width)[-c.width :] for c in columns)


def headers(columns: Sequence[Column]) -> str:
    return " ".join(c.header.rjust(c.width) for c in columns)
