"""The HTML report's charts: SVG that takes its card's width, and the keys that explain it.

A report is read on a 1600-px monitor, a 1024-px laptop and a 390-px phone, so no chart has a
width of its own. Each signal chart is one `<svg width="100%">` of a fixed height in CSS pixels:
what must stay legible (axis labels, the time axis, the dashed thresholds, the shading) is
placed in pixels vertically and in percent horizontally, so text never shrinks with the card;
only the data line and its area sit in a nested SVG whose viewBox is stretched to the plot
(`preserveAspectRatio="none"`, strokes kept at their width by `non-scaling-stroke`). The y-axis
labels hang in the SVG's left padding, a gutter that the percentages do not count.

The findings timeline is HTML (a grid of names and tracks, bars placed in percent), so a long
rule name wraps instead of pushing the page wider and, below 600 px, goes above its track.

Every encoding is named in words beside the chart (`signals_key`, `timeline_key`): which band
is which finding, what the dashed lines are, what a grey or pale bar means. Every string is
escaped here (`esc`): a trace from someone else cannot inject markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any, get_args

from vtop import durations, fmt
from vtop.figures import FIGURE
from vtop.report.document import Document, FindingDoc, TimelineName, signals_of

HEIGHT = 150
"""A signal chart's height in CSS pixels, at every width."""
GUTTER = 46
"""The left padding that holds the y-axis labels (the CSS of `svg.plot` must say the same)."""
TOP, PLOT_BOTTOM = 8, 124
PLOT_H = PLOT_BOTTOM - TOP
X_UNITS = 1000
"""The data's horizontal units in the stretched inner SVG: the window is 0 to 1000."""
COLOURS = {
    "OK": "#2e7d32",
    "INFO": "#2e7d32",
    "WARNING": "#b26a00",
    "CRITICAL": "#c62828",
    "UNKNOWN": "#616161",
}
SEVERITY_WORDS = {"CRITICAL": "red", "WARNING": "amber", "INFO": "green", "OK": "green"}
KV_LEVELS = (
    (0.9, "WARNING", "90 % full: vLLM's dashboard turns orange; requests may be preempted"),
    (0.98, "CRITICAL", "98 % full: the dashboard's red"),
)
"""The dashed lines on the KV chart, as the memory-ceiling rule's sources name them."""
CHARTS: tuple[tuple[TimelineName, str, str], ...] = tuple(
    (name, FIGURE[name].label, FIGURE[name].unit) for name in get_args(TimelineName)
)
"""Each series of the timeline as a chart: its figure, named and in its unit as the numbers'
table below the charts names it (`vtop.figures`)."""


def esc(v: Any) -> str:
    """`v` as HTML text or an attribute's value: nothing in it is markup."""
    return escape(str(v), quote=True)


def nice_ceiling(v: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above v: axis labels people can read."""
    if v <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(v))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * step >= v * (1 - 1e-9):
            return m * step
    return 10.0 * step


def axis_label(v: float, unit: str) -> str:
    """A y-axis label, short enough for the gutter: `100%`, `2.5k`, `500 ms`, `25 s`."""
    if unit == "ratio":
        return f"{v * 100:.0f}%"
    if unit == "seconds" and v:
        return f"{fmt.num(v * 1000)} ms" if v < 1 else f"{fmt.num(v)} s"
    return fmt.num(v)


def _pct(t: float, t0: float, t1: float) -> float:
    """Where `t` falls across the window, in percent of the plot's width."""
    span = (t1 - t0) or 1.0
    return min(max((t - t0) / span * 100.0, 0.0), 100.0)


def _iso(t: float) -> str:
    from vtop.report.build import iso

    return iso(t) or ""


def shaded(doc: Document) -> list[FindingDoc]:
    """The findings shaded on every chart: those that count (one explained by a root cause is
    covered by the cause's band)."""
    return [f for f in doc["findings"] if f.get("counts", f["state"] == "firing")]


def _shading(doc: Document, t0: float, t1: float) -> list[str]:
    out = []
    for f in shaded(doc):
        a, b = _pct(f["first_t"], t0, t1), _pct(f["last_t"], t0, t1)
        colour = COLOURS.get(f["severity"], COLOURS["UNKNOWN"])
        out.append(
            f'<rect x="{a:.2f}%" y="{TOP}" width="{max(b - a, 0.4):.2f}%" height="{PLOT_H}" '
            f'fill="{colour}" opacity="0.14"><title>{esc(f["rule"])} firing</title></rect>'
        )
    return out


def _time_axis(t0: float, t1: float) -> list[str]:
    out = []
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        label = esc(fmt.clock(_iso(t0 + (t1 - t0) * frac)))
        out.append(
            f'<text x="{frac * 100:g}%" y="{HEIGHT - 8}" text-anchor="{anchor}">{label}</text>'
        )
    return out


def headline(doc: Document, name: TimelineName, known: list[float]) -> str:
    """The chart's figures: the window's own (every poll), not the bins'."""
    if name == "ttft_p90":
        ttft = doc["latency"].get("ttft")
        p90 = ttft["p90"] if ttft is not None else None
        return f"p90 over the window {fmt.report_num(p90, 'seconds')}"
    signals = signals_of(doc["signals"])  # none where the window had no endpoint
    s = signals.get(name) if signals is not None else None
    if s is None:
        return f"last {fmt.report_num(known[-1])}"
    unit = s["unit"]
    avg, top, last = (fmt.report_num(v, unit) for v in (s["avg"], s["max"], s["last"]))
    return f"avg {avg} · max {top} · last {last}"


def chart(doc: Document, name: TimelineName, title: str, unit: str) -> str | None:
    """One signal across the window as a `<figure>`: its name and figures, the SVG, and for
    KV usage the key to its dashed lines. None when the signal was never read."""
    tl = doc["timeline"]
    ts: list[float] = tl.get("t") or []
    values: list[float | None] = tl.get(name) or []
    known = [v for v in values if v is not None]
    t0, t1 = doc["window"]["start_t"], doc["window"]["end_t"]
    if not known or t0 is None or t1 is None:
        return None
    hi = 1.0 if unit == "ratio" else nice_ceiling(max(known) * 1.05)

    def y(v: float) -> float:
        """Pixels down from the plot's top."""
        return PLOT_H - min(max(v / hi, 0.0), 1.0) * PLOT_H

    parts = [
        f'<figure class="chart"><figcaption><b>{esc(title)}</b> '
        f"<span>{esc(headline(doc, name, known))}</span></figcaption>",
        f'<svg class="plot" width="100%" height="{HEIGHT}" role="img" '
        f'aria-label="{esc(title)} across the window" xmlns="http://www.w3.org/2000/svg">',
    ]
    parts.extend(_shading(doc, t0, t1))
    for frac in (0.0, 0.5, 1.0):
        yy = TOP + y(hi * frac)
        parts.append(f'<line class="grid" x1="0" x2="100%" y1="{yy:.1f}" y2="{yy:.1f}"/>')
        parts.append(
            f'<text x="-6" y="{yy + 4:.1f}" text-anchor="end">{esc(axis_label(hi * frac, unit))}'
            "</text>"
        )
    if unit == "ratio":
        for level, severity, _ in KV_LEVELS:
            yy = TOP + y(level)
            parts.append(
                f'<line x1="0" x2="100%" y1="{yy:.1f}" y2="{yy:.1f}" '
                f'stroke="{COLOURS[severity]}" stroke-width="1.5" stroke-dasharray="5 4"/>'
            )
    parts.extend(_series(ts, values, t0, t1, y, point_spacing(doc)))
    parts.extend(_time_axis(t0, t1))
    parts.append("</svg>")
    if unit == "ratio":
        parts.append(_key([(_dash(COLOURS[s]), words) for _, s, words in KV_LEVELS]))
    parts.append("</figure>")
    return "".join(parts)


def point_spacing(doc: Document) -> float | None:
    """How far apart the chart's points are: a bin, or the polls' mean spacing where polls
    are sparser than bins (a 2-second report has 60 bins of 33 ms and a poll every 250 ms)."""
    ts: list[float] = doc["timeline"].get("t") or []
    if len(ts) < 2:
        return None
    window = doc["window"]
    polls = window["polls"]
    return max(ts[1] - ts[0], window["duration_s"] / (polls - 1) if polls > 1 else 0.0)


def _series(
    ts: list[float],
    values: list[float | None],
    t0: float,
    t1: float,
    y: Callable[[float], float],
    spacing: float | None,
) -> list[str]:
    """The line and its area, in the stretched inner SVG, broken where readings are further
    apart than 1.5 points (no poll answered there); a reading alone is a dot."""
    gap = 1.5 * spacing if spacing is not None else math.inf
    segments: list[list[tuple[float, float]]] = [[]]
    before: float | None = None
    for t, value in zip(ts, values, strict=False):
        if value is None:
            continue
        if before is not None and t - before > gap:
            segments.append([])
        segments[-1].append((_pct(t, t0, t1), y(value)))
        before = t
    inner, dots = [], []
    for seg in segments:
        if len(seg) == 1:
            (x0, y0), *_ = seg
            dots.append(f'<circle class="dot" cx="{x0:.2f}%" cy="{TOP + y0:.1f}" r="2.2"/>')
        elif seg:
            d = "M" + " L".join(f"{a * X_UNITS / 100:.1f},{b:.1f}" for a, b in seg)
            first, last = seg[0][0] * X_UNITS / 100, seg[-1][0] * X_UNITS / 100
            floor = f" L{last:.1f},{PLOT_H} L{first:.1f},{PLOT_H} Z"
            inner.append(f'<path class="area" d="{d}{floor}"/>')
            inner.append(f'<path class="ln" d="{d}" vector-effect="non-scaling-stroke"/>')
    return [
        f'<svg y="{TOP}" width="100%" height="{PLOT_H}" viewBox="0 0 {X_UNITS} {PLOT_H}" '
        f'preserveAspectRatio="none" overflow="visible">',
        *inner,
        "</svg>",
        *dots,
    ]


def _band(colour: str) -> str:
    return f'<span class="k band" style="background:{colour}"></span>'


def _dash(colour: str) -> str:
    return f'<span class="k dash" style="border-color:{colour}"></span>'


def _bar(colour: str, *, pale: bool = False) -> str:
    extra = " pale" if pale else ""
    return f'<span class="k bar{extra}" style="background:{colour}"></span>'


def _key(entries: list[tuple[str, str]]) -> str:
    items = "".join(f"<li>{swatch}{esc(words)}</li>" for swatch, words in entries)
    return f'<ul class="key">{items}</ul>'


def signals_key(doc: Document) -> str:
    """What the charts draw, in words: the line, each band's colour and whose it is."""
    spacing = point_spacing(doc)
    step = f"one point every {_step(spacing)}" if spacing is not None else "its readings"
    entries = [
        ('<span class="k line"></span>', f"line: the signal, {step}; a break: no reading there")
    ]
    by_severity: dict[str, list[str]] = {}
    for f in shaded(doc):
        names = by_severity.setdefault(f["severity"], [])
        if f["rule"] not in names:
            names.append(f["rule"])
    for severity in ("CRITICAL", "WARNING", "INFO", "OK"):
        rules = by_severity.get(severity)
        if rules:
            colour = SEVERITY_WORDS[severity]
            entries.append(
                (
                    _band(COLOURS[severity]),
                    f"{colour} band: while {', '.join(rules)} ({severity}) fired",
                )
            )
    return _key(entries)


def _step(s: float) -> str:
    """A bin's width in words: `500 ms`, `5 s`, `1m 30s`."""
    if s < 1:
        return f"{s * 1000:.0f} ms"
    return f"{s:.2g} s" if s < 60 else durations.span(s)


def _bar_words(f: FindingDoc) -> str:
    if f["state"] in ("pending", "insufficient"):
        return "no verdict yet"
    if not f.get("counts", f["state"] == "firing"):
        return f"{f['severity']}, explained by {f.get('suppressed_by') or 'a root cause'}"
    return f["severity"]


def findings_timeline(doc: Document) -> str | None:
    """Each finding's span of the window as a bar on its own track, named in words."""
    findings = doc["findings"]
    t0, t1 = doc["window"]["start_t"], doc["window"]["end_t"]
    if not findings or t0 is None or t1 is None:
        return None
    rows = []
    for f in findings:
        undecided = f["state"] in ("pending", "insufficient")  # no verdict: not its colour
        colour = COLOURS["UNKNOWN" if undecided else f["severity"]]
        pale = not undecided and not f.get("counts", f["state"] == "firing")
        a, b = _pct(f["first_t"], t0, t1), _pct(f["last_t"], t0, t1)
        width = max(b - a, 0.6)
        rows.append(
            f'<div class="name"><code>{esc(f["rule"])}</code> {esc(_bar_words(f))}</div>'
            f'<div class="track"><span class="bar{" pale" if pale else ""}" '
            f'style="left:{min(a, 100 - width):.2f}%;width:{width:.2f}%;background:{colour}" '
            f'title="{esc(f["summary"])}"></span></div>'
        )
    ticks = "".join(f"<span>{esc(fmt.clock(_iso(t)))}</span>" for t in (t0, (t0 + t1) / 2, t1))
    return (
        '<figure class="chart timeline" role="img" aria-label="findings across the window">'
        "<figcaption><b>findings across the window</b></figcaption>"
        f'<div class="lanes">{"".join(rows)}<div class="name"></div>'
        f'<div class="ticks">{ticks}</div></div>{timeline_key(doc)}</figure>'
    )


def timeline_key(doc: Document) -> str:
    """The bars' colours and shades that this timeline uses, in words."""
    findings = doc["findings"]
    decided = [f for f in findings if f["state"] not in ("pending", "insufficient")]
    present = {f["severity"] for f in decided}
    entries = [
        (_bar(COLOURS[s]), f"{SEVERITY_WORDS[s]}: a {s} finding, from its first firing to its last")
        for s in ("CRITICAL", "WARNING", "INFO")
        if s in present
    ]
    explained = [f for f in decided if not f.get("counts", f["state"] == "firing")]
    if explained:
        entries.append(
            (
                _bar(COLOURS.get(explained[0]["severity"], COLOURS["UNKNOWN"]), pale=True),
                "pale: explained by another finding (its root cause), so not shaded on the charts",
            )
        )
    if len(decided) < len(findings):
        entries.append(
            (_bar(COLOURS["UNKNOWN"]), "grey: still being judged at the end, no verdict yet")
        )
    return _key(entries)
