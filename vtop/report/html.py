"""The report as one self-contained HTML file: inline CSS and SVG, no script, no fetches.

It is meant to be attached to a ticket or mailed, opened years later, offline, so nothing may
load from elsewhere. It is read at any width, from a phone's 390 px to a wide monitor, and
printed: nothing has a width of its own (charts take their card's, `vtop.report.charts`), the
charts go from two columns to one, a long string from outside (a URL, a model name, a flag)
wraps inside its own box, and below 600 px a table of knobs or events stacks each row. Every
string from the document is escaped (`charts.esc`): a trace from someone else cannot inject
markup.
"""

from __future__ import annotations

from vtop import fmt
from vtop.figures import FIGURE
from vtop.report.charts import (
    CHARTS,
    COLOURS,
    chart,
    findings_timeline,
    signals_key,
)
from vtop.report.charts import esc as _e
from vtop.report.document import Document
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

CSS = """
:root{--fg:#1d1d1f;--muted:#5f6368;--bg:#fff;--panel:#f4f5f7;--grid:#d9dce1;--line:#1565c0;
color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--fg:#e8eaed;--muted:#9aa0a6;--bg:#16181c;
--panel:#1f2227;--grid:#3a3f47;--line:#64b5f6}}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:var(--bg);margin:24px auto;max-width:1260px;padding:0 16px;overflow-wrap:anywhere}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.badge{display:inline-block;color:#fff;border-radius:4px;padding:2px 10px;font-weight:600}
.reason{color:var(--muted);margin:4px 0 16px}
table{border-collapse:collapse;margin:4px 0}td,th{padding:3px 12px 3px 0;text-align:left;
vertical-align:top}th{color:var(--muted);font-weight:500}.meta th,td.n,td.w{white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}td.v{text-align:right}
code{font:13px ui-monospace,Menlo,Consolas,monospace}
.charts{display:grid;grid-template-columns:1fr;
grid-template-columns:repeat(auto-fill,minmax(min(100%,420px),1fr));gap:12px}
.chart{background:var(--panel);border-radius:6px;margin:0;padding:10px 12px 8px;min-width:0}
figcaption{display:flex;flex-wrap:wrap;justify-content:space-between;gap:0 12px;
font-size:13px;margin-bottom:4px}figcaption span{color:var(--muted);font-size:12px}
svg.plot{display:block;width:100%;padding-left:46px;overflow:visible}
svg text{fill:var(--muted);font:11px system-ui,sans-serif}
.grid{stroke:var(--grid);stroke-width:1}.ln{fill:none;stroke:var(--line);stroke-width:1.75}
.area{fill:var(--line);opacity:.1}.dot{fill:var(--line)}
.key{list-style:none;margin:4px 0 0;padding:0;display:flex;flex-wrap:wrap;gap:2px 18px;
font-size:12px;color:var(--muted)}.key li{display:flex;gap:6px;align-items:baseline}
.k{flex:none;display:inline-block;width:18px;height:10px;border-radius:2px}
.k.band{opacity:.35}.k.line,.k.dash{height:0;border-radius:0;border-top:2px solid var(--line);
transform:translateY(-4px)}.k.dash{border-top-style:dashed}
.legend{margin:0 0 10px}
.lanes{display:grid;grid-template-columns:fit-content(40%) minmax(0,1fr);gap:6px 12px;
align-items:center;margin:6px 0 4px}.name{font-size:12px;color:var(--muted)}
.name code{font-size:12px;color:var(--fg)}
.track{position:relative;height:12px;background:var(--bg);border-radius:2px}
.track .bar{position:absolute;top:0;bottom:0;border-radius:2px}.pale{opacity:.4}
.ticks{display:flex;justify-content:space-between;gap:8px;font-size:11px;color:var(--muted)}
.evidence{display:grid;grid-template-columns:fit-content(45%) minmax(0,1fr);gap:3px 12px;
margin:6px 0}.evidence dt{color:var(--muted)}.evidence dd{margin:0}
.finding{background:var(--panel);border-radius:6px;padding:10px 14px;margin:8px 0;
border-left:5px solid var(--c)}.flag{background:var(--bg);padding:1px 6px;border-radius:3px}
footer{color:var(--muted);margin-top:32px;font-size:12px}
@media (max-width:600px){body{margin:16px auto;padding:0 12px}
.lanes{grid-template-columns:minmax(0,1fr);gap:2px}.lanes .name:empty{display:none}
.track{margin-bottom:6px}.finding{padding:8px 10px}
table.rows,table.rows tbody{display:block}table.rows tr.head{display:none}
table.rows tr{display:grid;grid-template-columns:auto minmax(0,1fr) fit-content(50%);
gap:0 10px;padding:5px 0;border-top:1px solid var(--grid)}table.rows td{padding:0}
.knobs td:nth-child(1){grid-column:1/3}.knobs td:nth-child(2){grid-column:3}
.knobs td:nth-child(3){grid-column:1}.rows td:nth-child(n+3){color:var(--muted)}
.knobs td:nth-child(4){grid-column:2/4}.events td:nth-child(2){grid-column:2/4}
.events td:nth-child(n+3){grid-column:1/-1}}
@media print{:root{--fg:#000;--muted:#444;--bg:#fff;--panel:#f4f5f7;--grid:#ccc;
--line:#1565c0}body{margin:0;max-width:none;padding:0}.charts{grid-template-columns:1fr 1fr}
.chart,.finding,tr{break-inside:avoid}h2{break-after:avoid}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
"""


def _breakable(name: str) -> str:
    """A knob's name, escaped, that may break after each `_` on a narrow screen."""
    return _e(name).replace("_", "_<wbr>")


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
    out.append('<table class="meta">')
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
        out.append(signals_key(doc).replace('class="key"', 'class="key legend"', 1))
        out.append('<div class="charts">')
        out.extend(charts)
        out.append("</div>")
    out.append("<h2>Findings</h2>")
    timeline = findings_timeline(doc)
    if timeline:
        out.append(timeline)
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
            out.append('<dl class="evidence">')
            out.extend(f"<dt>{_e(e['name'])}</dt><dd>{_e(e['value'])}</dd>" for e in f["evidence"])
            out.append("</dl>")
        for r in f["recommendations"]:
            out.append(
                f'<div>change: <code class="flag">{_e(r["flag"])}</code> ({_e(why(r))})</div>'
            )
            if r["tradeoff"]:
                out.append(f"<div>tradeoff: {_e(r['tradeoff'])}</div>")
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
            fig = FIGURE[sig]
            out.append(
                f"<tr><td>{_e(fig.label)}</td><td class=n>{_e(fig.report(s['avg']))}"
                f"</td><td class=n>{_e(fig.report(s['max']))}</td><td class=n>"
                f"{_e(fig.report(s['last']))}</td></tr>"
            )
        for name, v in ep["latency"].items():
            if not v["observations"]:
                continue
            fig = FIGURE[name]
            out.append(
                f"<tr><td>{_e(fig.label)} p50 / p90 / p99</td><td class=n>"
                f"{_e(fig.report(v['p50']))}</td><td class=n>"
                f"{_e(fig.report(v['p90']))}</td><td class=n>"
                f"{_e(fig.report(v['p99']))}</td></tr>"
            )
        out.append("</table>")
        if ep["knobs"]:
            out.append('<h2>Configuration</h2><table class="rows knobs">')
            out.append(
                '<tr class="head"><th>knob</th><th>value</th><th>from</th><th>detail</th></tr>'
            )
            for name, k in ep["knobs"].items():
                out.append(
                    f"<tr><td><code>{_breakable(name)}</code></td><td class=v>"
                    f"{_e(fmt.knob(k['value']))}</td><td class=w>{_e(k['provenance'])}</td>"
                    f"<td>{_e(k['detail'])}</td></tr>"
                )
            out.append("</table>")
    if doc["events"]:
        out.append('<h2>Events</h2><table class="rows events">')
        for ev in doc["events"]:
            out.append(
                f"<tr><td class=w>{_e(fmt.when(ev['time']))}</td><td class=w>{_e(ev['kind'])}</td>"
                f"<td>{_e(ev['endpoint'])}</td><td>{_e(ev['message'])}</td></tr>"
            )
        out.append("</table>")
    out.append(f"<footer>vtop {_e(doc['vtop'])} · report format {doc['report_version']}</footer>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
