"""The report as one self-contained HTML file: inline CSS and SVG, no script, no fetches.

It is meant to be attached to a ticket or mailed, opened years later, offline, so nothing may
load from elsewhere. Charts are drawn here as SVG paths from the document's timeline (gaps in
the data break the line rather than being drawn as zero), with the windows in which findings
fired shaded on every chart and laid out on a timeline of their own. Every string from the
document is escaped: a trace from someone else cannot inject markup.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from vtop import fmt
from vtop.report.document import Document, TimelineName, signals_of
from vtop.report.text import (
    SIGNAL_ORDER,
    _finding_span,
    _gpu_line,
    _health,
    _server_line,
    _window_line,
    check_line,
    search_lines,
    why,
)

W, H = 600, 170
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 26, 26
COLOURS = {
    "OK": "#2e7d32",
    "INFO": "#2e7d32",
    "WARNING": "#b26a00",
    "CRITICAL": "#c62828",
    "UNKNOWN": "#616161",
}
CHARTS: tuple[tuple[TimelineName, str, str], ...] = (
    ("running", "running requests", "requests"),
    ("waiting", "waiting requests", "requests"),
    ("kv_usage", "KV cache usage", "ratio"),
    ("preemptions_per_s", "preemptions/s", "1/s"),
    ("generation_tokens_per_s", "generation tokens/s", "tokens/s"),
    ("ttft_p90", "TTFT p90", "seconds"),
)

CSS = """
:root{--fg:#1d1d1f;--muted:#5f6368;--bg:#fff;--panel:#f6f7f9;--grid:#d9dce1;--line:#1565c0}
@media (prefers-color-scheme:dark){:root{--fg:#e8eaed;--muted:#9aa0a6;--bg:#16181c;
--panel:#1f2227;--grid:#3a3f47;--line:#64b5f6}}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:var(--bg);margin:24px auto;max-width:1260px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.badge{display:inline-block;color:#fff;border-radius:4px;padding:2px 10px;font-weight:600}
.reason{color:var(--muted);margin:4px 0 16px}
table{border-collapse:collapse;margin:4px 0}td,th{padding:3px 12px 3px 0;text-align:left;
vertical-align:top}th{color:var(--muted);font-weight:500}td.n{text-align:right;
font-variant-numeric:tabular-nums}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:12px}
.chart{background:var(--panel);border-radius:6px}
svg text{fill:var(--muted);font:11px system-ui,sans-serif}svg .title{fill:var(--fg);
font-size:13px;font-weight:600}
.finding{background:var(--panel);border-radius:6px;padding:10px 14px;margin:8px 0;
border-left:5px solid var(--c)}code{font:13px ui-monospace,Menlo,monospace}
.flag{background:var(--bg);padding:1px 6px;border-radius:3px}
footer{color:var(--muted);margin-top:32px;font-size:12px}
"""


def _e(v: Any) -> str:
    return escape(str(v), quote=True)


def _x(t: float, t0: float, t1: float) -> float:
    span = (t1 - t0) or 1.0
    return LEFT + (t - t0) / span * (W - LEFT - RIGHT)


def _shading(doc: Document, t0: float, t1: float, y0: float, y1: float) -> list[str]:
    out = []
    for f in doc["findings"]:
        if not f.get("counts", f["state"] == "firing"):
            continue  # explained by a root cause: its shading is the cause's
        a = _x(max(f["first_t"], t0), t0, t1)
        b = _x(min(f["last_t"], t1), t0, t1)
        colour = COLOURS.get(f["severity"], COLOURS["UNKNOWN"])
        out.append(
            f'<rect x="{a:.1f}" y="{y0:.1f}" width="{max(b - a, 2):.1f}" '
            f'height="{y1 - y0:.1f}" fill="{colour}" opacity="0.13">'
            f"<title>{_e(f['rule'])}</title></rect>"
        )
    return out


def _time_axis(t0: float, t1: float, y: float) -> list[str]:
    out = []
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        t = t0 + (t1 - t0) * frac
        label = fmt.clock(_iso(t))
        out.append(
            f'<text x="{_x(t, t0, t1):.1f}" y="{y:.1f}" text-anchor="{anchor}">{_e(label)}</text>'
        )
    return out


def _iso(t: float) -> str:
    from vtop.report.build import iso

    return iso(t) or ""


def nice_ceiling(v: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above v: axis labels people can read."""
    if v <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(v))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * step >= v * (1 - 1e-9):
            return m * step
    return 10.0 * step


def _headline(doc: Document, name: TimelineName, known: list[float]) -> str:
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
    tl = doc["timeline"]
    ts: list[float] = tl.get("t") or []
    values: list[float | None] = tl.get(name) or []
    known = [v for v in values if v is not None]
    t0, t1 = doc["window"]["start_t"], doc["window"]["end_t"]
    if not known or t0 is None or t1 is None:
        return None
    lo = 0.0
    hi = 1.0 if unit == "ratio" else nice_ceiling(max(known) * 1.05)
    y_top, y_bottom = TOP, H - BOTTOM

    def y(v: float) -> float:
        return y_bottom - (v - lo) / (hi - lo) * (y_bottom - y_top)

    parts = [
        f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="{_e(title)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    parts.append(f'<text class="title" x="{LEFT}" y="16">{_e(title)}</text>')
    parts.append(
        f'<text x="{W - RIGHT}" y="16" text-anchor="end">{_e(_headline(doc, name, known))}</text>'
    )
    parts.extend(_shading(doc, t0, t1, y_top, y_bottom))
    for frac in (0.0, 0.5, 1.0):
        v = lo + (hi - lo) * frac
        yy = y(v)
        parts.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}" '
            f'stroke="var(--grid)" stroke-width="1"/>'
        )
        label = _e(fmt.report_num(v, unit))
        parts.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{label}</text>')
    if unit == "ratio":
        for level, colour in ((0.9, COLOURS["WARNING"]), (0.98, COLOURS["CRITICAL"])):
            parts.append(
                f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(level):.1f}" '
                f'y2="{y(level):.1f}" stroke="{colour}" stroke-dasharray="4 3"/>'
            )
    segments: list[list[tuple[float, float]]] = [[]]
    for t, value in zip(ts, values, strict=False):
        if value is None:
            if segments[-1]:
                segments.append([])
            continue
        segments[-1].append((_x(t, t0, t1), y(value)))
    for seg in segments:
        if not seg:
            continue
        if len(seg) == 1:
            x0, y0 = seg[0]
            parts.append(f'<circle cx="{x0:.1f}" cy="{y0:.1f}" r="2" fill="var(--line)"/>')
            continue
        d = "M" + " L".join(f"{a:.1f},{b:.1f}" for a, b in seg)
        area = d + f" L{seg[-1][0]:.1f},{y_bottom:.1f} L{seg[0][0]:.1f},{y_bottom:.1f} Z"
        parts.append(f'<path d="{area}" fill="var(--line)" opacity="0.12"/>')
        parts.append(f'<path d="{d}" fill="none" stroke="var(--line)" stroke-width="1.6"/>')
    parts.extend(_time_axis(t0, t1, H - 8))
    parts.append("</svg>")
    return "".join(parts)


def findings_timeline(doc: Document) -> str | None:
    findings = doc["findings"]
    t0, t1 = doc["window"]["start_t"], doc["window"]["end_t"]
    if not findings or t0 is None or t1 is None:
        return None
    row = 22
    height = TOP + row * len(findings) + BOTTOM
    width = 2 * W + 12
    span = (t1 - t0) or 1.0
    label_w = 230

    def x(t: float) -> float:
        return label_w + (t - t0) / span * (width - label_w - RIGHT)

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        'aria-label="findings on a timeline" xmlns="http://www.w3.org/2000/svg">',
        '<text class="title" x="8" y="16">findings on the timeline</text>',
    ]
    for i, f in enumerate(findings):
        yy = TOP + i * row
        undecided = f["state"] in ("pending", "insufficient")  # no verdict: not its colour
        colour = COLOURS["UNKNOWN" if undecided else f["severity"]]
        a, b = x(max(f["first_t"], t0)), x(min(f["last_t"], t1))
        parts.append(f'<text x="8" y="{yy + 14}">{_e(f["rule"])[:34]}</text>')
        parts.append(
            f'<rect x="{a:.1f}" y="{yy + 3}" width="{max(b - a, 3):.1f}" height="14" '
            f'rx="2" fill="{colour}"><title>{_e(f["summary"])}</title></rect>'
        )
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        t = t0 + span * frac
        parts.append(
            f'<text x="{x(t):.1f}" y="{height - 8}" text-anchor="{anchor}">'
            f"{_e(fmt.clock(_iso(t)))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def render_html(doc: Document) -> str:
    status = doc["status"]
    colour = COLOURS[status]
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>vtop report: {_e(status)}</title><style>{CSS}</style></head><body>",
    ]
    out.append(
        f'<h1>vtop report <span class="badge" style="background:{colour}">{_e(status)}</span></h1>'
    )
    out.append(f'<p class="reason">{_e(doc["reason"])}</p>')
    out.append("<table>")
    src = doc["source"]
    out.append(f"<tr><th>source</th><td>{_e(src['kind'])} <code>{_e(src['name'])}</code></td></tr>")
    if doc["window"]["from"]:
        out.append(f"<tr><th>window</th><td>{_e(_window_line(doc))}</td></tr>")
    for ep in doc["endpoints"]:
        out.append(
            f"<tr><th>endpoint</th><td>{_e(_server_line(ep))}<br>{_e(_health(ep))}</td></tr>"
        )
    for g in doc["gpus"]:
        out.append(f"<tr><th>GPU {g['index']}</th><td>{_e(_gpu_line(g))}</td></tr>")
    if doc.get("gpu_unavailable"):
        out.append(f"<tr><th>GPU</th><td>none readable: {_e(doc['gpu_unavailable'])}</td></tr>")
    out.append("</table>")
    charts = [c for c in (chart(doc, *spec) for spec in CHARTS) if c]
    if charts:
        out.append("<h2>Signals</h2>")
        out.append('<div class="charts">')
        out.extend(f'<div class="chart">{c}</div>' for c in charts)
        out.append("</div>")
    out.append("<h2>Findings</h2>")
    timeline = findings_timeline(doc)
    if timeline:
        out.append(f'<div class="chart">{timeline}</div>')
    if not doc["findings"]:
        out.append("<p>None.</p>")
    for f in doc["findings"]:
        c = COLOURS.get(f["severity"], COLOURS["UNKNOWN"])
        span = f"{fmt.clock(f['first'])} → {fmt.clock(f['last'])}"
        if f["state"] in ("pending", "insufficient"):
            c = COLOURS["UNKNOWN"]
            span = _finding_span(f)
        elif f["state"] == "suppressed":
            since = fmt.clock(f.get("suppressed_since") or f["last"])
            span += f", explained by {f['suppressed_by']} from {since}"
            span += " to the end" if f["active_at_end"] else ""
        elif f["active_at_end"]:
            span += ", still firing at the end"
        out.append(
            f'<div class="finding" style="--c:{c}"><b>{_e(f["severity"])}</b> '
            f"<code>{_e(f['rule'])}</code> on {_e(f['endpoint'])} · {_e(span)}"
            f"<br>{_e(f['summary'])}"
        )
        if f["evidence"]:
            out.append("<table>")
            for e in f["evidence"]:
                out.append(f"<tr><th>{_e(e['name'])}</th><td>{_e(e['value'])}</td></tr>")
            out.append("</table>")
        for r in f["recommendations"]:
            out.append(
                f'<div>change: <code class="flag">{_e(r["flag"])}</code> ({_e(why(r))})</div>'
            )
        prediction = f.get("prediction")
        if prediction:
            out.append(f"<div>predicted: {_e(prediction['line'])}</div>")
            if prediction["verdict"]:
                out.append(f"<div><b>but</b> {_e(prediction['verdict'])}</div>")
        for label, text in search_lines(f):
            out.append(f"<div>{_e(label)}: {_e(text)}</div>")
        out.append("</div>")
    checked = check_line(doc)
    if checked:
        out.append(f"<p>Predicted by {_e(checked)}.</p>")
    for ep in doc["endpoints"]:
        out.append(f"<h2>Numbers for {_e(ep['url'])}</h2><table>")
        out.append("<tr><th>signal</th><th>avg</th><th>max</th><th>last</th></tr>")
        for sig in SIGNAL_ORDER:
            s = ep["signals"].get(sig)
            if s is None:
                continue
            u = s["unit"]
            out.append(
                f"<tr><td>{_e(fmt.LABELS[sig])}</td><td class=n>{_e(fmt.report_num(s['avg'], u))}"
                f"</td><td class=n>{_e(fmt.report_num(s['max'], u))}</td><td class=n>"
                f"{_e(fmt.report_num(s['last'], u))}</td></tr>"
            )
        for name, v in ep["latency"].items():
            if not v["observations"]:
                continue
            out.append(
                f"<tr><td>{_e(fmt.LABELS[name])} p50 / p90 / p99</td><td class=n>"
                f"{_e(fmt.report_num(v['p50'], 'seconds'))}</td><td class=n>"
                f"{_e(fmt.report_num(v['p90'], 'seconds'))}</td><td class=n>"
                f"{_e(fmt.report_num(v['p99'], 'seconds'))}</td></tr>"
            )
        out.append("</table>")
        if ep["knobs"]:
            out.append("<h2>Configuration</h2><table>")
            out.append("<tr><th>knob</th><th>value</th><th>from</th><th>detail</th></tr>")
            for name, k in ep["knobs"].items():
                out.append(
                    f"<tr><td><code>{_e(name)}</code></td><td class=n>"
                    f"{_e(fmt.knob(k['value']))}</td><td>{_e(k['provenance'])}</td>"
                    f"<td>{_e(k['detail'])}</td></tr>"
                )
            out.append("</table>")
    if doc["events"]:
        out.append("<h2>Events</h2><table>")
        for ev in doc["events"]:
            out.append(
                f"<tr><td>{_e(fmt.when(ev['time']))}</td><td>{_e(ev['kind'])}</td>"
                f"<td>{_e(ev['endpoint'])}</td><td>{_e(ev['message'])}</td></tr>"
            )
        out.append("</table>")
    out.append(f"<footer>vtop {_e(doc['vtop'])} · report format {doc['report_version']}</footer>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
