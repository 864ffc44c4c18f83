"""The report for a terminal, and as Markdown to paste into an issue.

Both are views of the JSON document (never of live objects), laid out for their medium: the
text version aligns columns for a monospace 100-column terminal; the Markdown version uses
tables GitHub renders, code spans for flags, and the same unicode sparklines. Both are
deterministic for a given document, which is what the golden-file tests hold them to.

In Markdown, text is markup: a model name `![x](http://…)` would load an image in the issue
it is pasted into, `**…**` would shout, `|` would split a table row, `<img …>` and `&#8238;`
would be HTML. So every value goes in through `_md` (text: each character Markdown reads
backslash-escaped, autolinks broken, `<` an entity) or `_code` (a code span, whose fence no
backtick in the value can close), and only the layout around them is live Markdown.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import get_args

from vtop import durations, fmt
from vtop.figures import FIGURE
from vtop.report.document import (
    Document,
    EndpointDoc,
    FindingDoc,
    GpuDoc,
    RecommendationDoc,
    SignalName,
    TimelineName,
)
from vtop.triage.explain import shown_formula

SIGNAL_ORDER: tuple[SignalName, ...] = get_args(SignalName)
CHARTED: tuple[TimelineName, ...] = (
    "running",
    "waiting",
    "kv_usage",
    "preemptions_per_s",
    "generation_tokens_per_s",
)
"""The signals the timeline has a series of (the others have no trend)."""
SPARK_WIDTH = 24


def _window_line(doc: Document) -> str:
    w = doc["window"]
    frm, to = fmt.when(w["from"]), fmt.when(w["to"])
    if w["from"] and w["to"] and w["from"][:10] == w["to"][:10]:
        to = fmt.clock(w["to"])
    step = w.get("step_s")
    rules = f", rules every {fmt.report_num(step)} s" if step else ""
    return f"{frm} → {to}  ({durations.span(w['duration_s'])}, {w['polls']} polls{rules})"


def _server_line(ep: EndpointDoc) -> str:
    srv = ep["server"]
    parts = [ep["url"]]
    if srv["version"]:
        parts.append(f"vLLM {srv['version']}")
    parts.extend(srv["models"][:3])
    if srv["max_model_len"]:
        parts.append(f"max_model_len {srv['max_model_len']}")
    return "  ".join(parts)


def _health(ep: EndpointDoc) -> str:
    text = (
        f"{ep['status']}: {ep['polls']} polls, {ep['failed_polls']} failed, "
        f"{ep['restarts']} restarts"
    )
    return text + (f"; last error: {ep['error']}" if ep["error"] else "")


PAGE_GPU_NOTE = "read from the server's /metrics (dcgm-exporter series)"


def _gpu_line(g: GpuDoc) -> str:
    parts = [g["name"]] if g["name"] else []
    if g.get("error"):
        parts.append(f"{g['error']} since {fmt.clock(g.get('error_since'))}")
    util, mem, power, temp = g["util_pct"], g["mem_used_bytes"], g["power_w"], g["temp_c"]
    if util:
        parts.append(
            f"util avg {fmt.report_num(util['avg'], 'percent')} "
            f"max {fmt.report_num(util['max'], 'percent')}"
        )
    if mem:
        of = f" of {fmt.report_num(g['mem_total_bytes'], 'bytes')}" if g["mem_total_bytes"] else ""
        parts.append(f"memory max {fmt.report_num(mem['max'], 'bytes')}{of}")
    if power:
        parts.append(f"power avg {power['avg']:.0f} W")
    if temp:
        parts.append(f"temp max {temp['max']:.0f} °C")
    if g.get("source") == "page":
        parts.append(PAGE_GPU_NOTE)
    return "  ".join(parts)


def series(doc: Document, name: SignalName) -> list[float | None]:
    """The timeline's series of a signal; empty where it has none (a rate not charted)."""
    return (doc["timeline"].get(name) if name in CHARTED else None) or []


def _trend(doc: Document, name: SignalName, width: int = SPARK_WIDTH) -> str:
    values = series(doc, name)
    if not values:
        return ""
    share = FIGURE[name].unit == "ratio"  # a share's trend spans 0 to 100 %, not its range
    return fmt.spark(values, width, lo=0.0, hi=1.0) if share else fmt.spark(values, width)


def why(r: RecommendationDoc) -> str:
    """What the change does to the knob and the arithmetic behind it, in words: `down from
    256; demand p95 … = 97 → rounded up to a multiple of 8: 104; …`. The raw formula is the
    JSON's (`formula`); a document without `explanation` (an older vtop's) shows it here."""
    moved = r.get("change") or f"now {fmt.knob(r['from'])}"
    assumed = ", assumed" if r["assumed"] else ""
    words = shown_formula(r.get("explanation") or "", r["formula"] or "")
    return f"{moved}{assumed}" + (f"; {words}" if words else "")


def _recommendation(r: RecommendationDoc) -> str:
    return f"{_change(r)}  ({why(r)})"


def _change(r: RecommendationDoc, code: Callable[[str], str] = str) -> str:
    """The flag that applies the change, once: `--max-num-seqs 128` (`code`: how it is
    written, a code span in Markdown). The engine argument beside it (`max_num_seqs=128`)
    would only say it again; the JSON keeps it (`engine_arg`) for programs."""
    return code(r["flag"])


def search_lines(f: FindingDoc) -> list[tuple[str, str]]:
    """How the twin chose the configuration predicted (`chosen`, or `unchecked` when it could
    not judge the candidates) and each alternative beside it (`instead`), as (label, text)."""
    prediction = f.get("prediction")
    search = prediction.get("search") if prediction else None
    if search is None or prediction is None or prediction["confidence"] == "withheld":
        return []  # the withheld prediction's line already says why nothing was chosen
    out = [("chosen" if search["checked"] else "unchecked", search["line"])]
    seen = {a["flags"]: a for r in f["recommendations"] for a in r.get("alternatives", [])}
    return out + [("instead", a["line"]) for a in seen.values()]


def _brief(name: str) -> str:
    """A figure as a prediction's reason names it (`vtop.figures`); a name this vtop does not
    know (a newer one's document) as written."""
    fig = FIGURE.get(name)
    return fig.brief if fig is not None else name


def check_line(doc: Document) -> str | None:
    """What the predictions stand on, in a line: the twin at today's knobs against the
    server (`prediction_check`); None when nothing was predicted."""
    c = doc.get("prediction_check")
    if not c:
        return None
    where = f"fitted to {c['endpoint']} over {durations.span(c['window_s'])}"
    if c["confidence"] == "withheld":
        return f"the twin {where}; predictions withheld: {c['reason']}"
    tokens = c["errors"].get("generation_tokens_per_s")
    parts = [f"{FIGURE['generation_tokens_per_s'].brief} off by {fmt.pct(tokens)}"]
    for name, family in c["families"].items():
        if name == "throughput" or family["worst"] is None or family["error"] is None:
            continue
        error = family["error"]
        by = f"{error:.3g}x" if family["measure"] == "factor" else fmt.pct(error)
        withheld = ", withheld" if family["withheld"] else ""
        worst = _brief(family["worst"])
        parts.append(f"{name} off by {by} ({worst}{withheld})")
    return f"the twin {where}: {'; '.join(parts)}; confidence {c['confidence']}"


def _finding_span(f: FindingDoc) -> str:
    """When it fired, and its state at the end of the window (or when it last stood); for a
    warning still being judged at the end, how long it held and what it still needs."""
    if f["state"] in ("pending", "insufficient"):
        needs = f.get("needs_s")
        more = f"needs {durations.span(needs)} more" if needs is not None else f["summary"]
        return (
            f"no verdict yet: holding from {fmt.clock(f['first'])}, "
            f"{durations.span(f.get('held_s') or 0.0)} so far; {more}"
        )
    ended = f["active_at_end"]
    if f["state"] == "suppressed":
        head = f"from {fmt.clock(f['first'])}" + ("" if ended else f" until {fmt.clock(f['last'])}")
        since = fmt.clock(f.get("suppressed_since") or f["last"])
        tail = " to the end" if ended else ""
        return f"{head}; explained by {f['suppressed_by']} from {since}{tail}"
    end = "still firing at the end" if ended else f"until {fmt.clock(f['last'])}"
    return f"from {fmt.clock(f['first'])}, {end}"


# -- text ---------------------------------------------------------------------------------------


def render_text(doc: Document) -> str:
    out = [f"vtop report: {doc['status']} ({doc['reason']})"]
    src = doc["source"]
    out.append(f"  source    {src['kind']} {src['name']}")
    if doc["window"]["from"]:
        out.append(f"  window    {_window_line(doc)}")
    for ep in doc["endpoints"]:
        out.append(f"  endpoint  {_server_line(ep)}")
        out.append(f"            {_health(ep)}")
    for g in doc["gpus"]:
        out.append(f"  GPU {g['index']}     {_gpu_line(g)}")
    if doc.get("gpu_unavailable"):
        out.append(f"  GPU       none readable: {doc['gpu_unavailable']}")
    for i, ep in enumerate(doc["endpoints"]):
        title = "signals" if len(doc["endpoints"]) == 1 else f"signals of {ep['url']}"
        out.append("")
        out.append(f"{title:<30}{'avg':>10}{'max':>11}{'last':>11}  " + ("trend" if i == 0 else ""))
        for signal in SIGNAL_ORDER:
            s = ep["signals"].get(signal)
            if s is None:
                continue
            fig = FIGURE[signal]
            trend = _trend(doc, signal) if i == 0 else ""
            out.append(
                f"  {fig.label:<28}{fig.report(s['avg']):>10}{fig.report(s['max']):>11}"
                f"{fig.report(s['last']):>11}  {trend}".rstrip()
            )
        lat = {k: v for k, v in ep["latency"].items() if v["observations"]}
        if lat:
            out.append("")
            out.append(
                f"{'latency over the window':<30}{'p50':>10}{'p90':>11}{'p99':>11}"
                f"{'mean':>11}{'count':>11}"
            )
            for name, v in lat.items():
                fig = FIGURE[name]
                out.append(
                    f"  {fig.label:<28}{fig.report(v['p50']):>10}{fig.report(v['p90']):>11}"
                    f"{fig.report(v['p99']):>11}{fig.report(v['mean']):>11}"
                    f"{fmt.report_num(v['observations']):>11}"
                )
    out.append("")
    if not doc["findings"]:
        out.append("findings  none")
    else:
        out.append("findings")
        for f in doc["findings"]:
            out.append(
                f"  {f['severity']:<9}{f['rule']}  {_finding_span(f)}"
                + (f"  [{f['endpoint']}]" if len(doc["endpoints"]) > 1 else "")
            )
            out.extend(_wrap(f["summary"], "           "))
            if f["evidence"]:
                ev = "; ".join(f"{e['name']}: {e['value']}" for e in f["evidence"])
                out.extend(_wrap(ev, "           evidence  ", "                     "))
            for r in f["recommendations"]:
                out.extend(
                    _wrap(_recommendation(r), "           change    ", "                     ")
                )
                if r["tradeoff"]:
                    out.extend(_wrap(r["tradeoff"], "           tradeoff  ", " " * 21))
            prediction = f.get("prediction")
            if prediction:
                out.extend(_wrap(prediction["line"], "           predicted ", " " * 21))
                if prediction["verdict"]:
                    out.extend(_wrap(prediction["verdict"], "           but       ", " " * 21))
                for label, said in search_lines(f):
                    out.extend(_wrap(said, f"           {label:<10}", " " * 21))
    checked = check_line(doc)
    if checked:
        out.extend(_wrap(checked, "  predicted by ", " " * 16))
    for ep in doc["endpoints"]:
        if not ep["knobs"]:
            continue
        title = "configuration" if len(doc["endpoints"]) == 1 else f"configuration of {ep['url']}"
        out.append("")
        out.append(title)
        for name, k in ep["knobs"].items():
            out.append(
                f"  {name:<28}{fmt.knob(k['value']):>10}  {k['provenance']:<9}"
                f"{k['detail']}".rstrip()
            )
    if doc["events"]:
        out.append("")
        out.append("events")
        for e in doc["events"][:20]:
            out.append(f"  {fmt.when(e['time'])}  {e['kind']:<10} {e['endpoint']}  {e['message']}")
        if len(doc["events"]) > 20:
            out.append(f"  … {len(doc['events']) - 20} more")
    return "\n".join(out) + "\n"


def _wrap(text: str, first: str, rest: str | None = None) -> list[str]:
    return textwrap.wrap(
        text, 100, initial_indent=first, subsequent_indent=rest if rest is not None else first
    ) or [first]


# -- Markdown -----------------------------------------------------------------------------------


_MD_ACTIVE = re.compile(
    r"[\\`*\[\]|~&$#@<\n]"  # emphasis, code, links and images, tables, HTML, entities, math
    r"|(?<![^\W_])_|_(?![^\W_])"  # an underscore not inside a word (in one it is inert)
    r"|:(?=//)|(?i:(?<=www))\."  # autolinks: http://…, www.…
)
_MD_BLOCK_START = re.compile(r"[-+>=]|\d+[.)]")
"""What makes a line a list item, a quote or a heading underline when it starts one."""


def _md_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "<":
        return "&lt;"
    return " " if char == "\n" else "\\" + char


def _md(text: str, *, starts_line: bool = False) -> str:
    """Text made inert in Markdown (a table cell, a list item, a quote): every character
    Markdown would read as emphasis, a link, an image, code, HTML, an entity, math or a cell's
    end backslash-escaped, autolinks broken, one line. `starts_line`: it opens a line (after a
    list marker or `>`), where `-`, `+`, `>`, `=` or `1.` would also start a block."""
    text = _MD_ACTIVE.sub(_md_escape, text)
    if starts_line and (m := _MD_BLOCK_START.match(text)):
        text = f"{text[: m.end() - 1]}\\{text[m.end() - 1 :]}"
    return text


def _code(text: str, *, in_table: bool = True) -> str:
    """Text as a Markdown code span, where nothing is markup: fenced by more backticks than
    any run inside it, a `|` escaped in a table (GFM splits cells on it even in code)."""
    text = text.replace("\n", " ")
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _list_code(text: str) -> str:
    return _code(text, in_table=False)


def render_markdown(doc: Document) -> str:
    out = [
        f"## vtop report: **{_md(doc['status'])}**",
        "",
        f"> {_md(doc['reason'], starts_line=True)}",
        "",
    ]
    src = doc["source"]
    out.append("| scope | detail |")  # GitHub's Markdown needs a header row: no empty one
    out.append("|---|---|")
    out.append(f"| source | {_md(src['kind'])} {_code(src['name'])} |")
    if doc["window"]["from"]:
        out.append(f"| window | {_md(_window_line(doc))} |")
    for ep in doc["endpoints"]:
        out.append(f"| endpoint | {_md(_server_line(ep))} — {_md(_health(ep))} |")
    for g in doc["gpus"]:
        out.append(f"| GPU {g['index']} | {_md(_gpu_line(g))} |")
    if unavailable := doc.get("gpu_unavailable"):
        out.append(f"| GPU | none readable: {_md(unavailable)} |")
    for i, ep in enumerate(doc["endpoints"]):
        out.append("")
        many = len(doc["endpoints"]) > 1
        out.append(f"### Signals of {_code(ep['url'], in_table=False)}" if many else "### Signals")
        out.append("")
        out.append(
            "| signal | avg | max | last | trend |" if i == 0 else "| signal | avg | max | last |"
        )
        out.append("|---|---:|---:|---:|---|" if i == 0 else "|---|---:|---:|---:|")
        for signal in SIGNAL_ORDER:
            s = ep["signals"].get(signal)
            if s is None:
                continue
            fig = FIGURE[signal]
            row = (
                f"| {fig.label} | {fig.report(s['avg'])} | {fig.report(s['max'])} | "
                f"{fig.report(s['last'])} |"
            )
            if i == 0:
                trend = _trend(doc, signal)
                row += f" {trend} |" if trend else " |"
            out.append(row)
        lat = {k: v for k, v in ep["latency"].items() if v["observations"]}
        if lat:
            out.append("")
            out.append("| latency over the window | p50 | p90 | p99 | mean | count |")
            out.append("|---|---:|---:|---:|---:|---:|")
            for name, v in lat.items():
                fig = FIGURE[name]
                out.append(
                    f"| {fig.label} | {fig.report(v['p50'])} | {fig.report(v['p90'])} | "
                    f"{fig.report(v['p99'])} | {fig.report(v['mean'])} | "
                    f"{fmt.report_num(v['observations'])} |"
                )
    out.append("")
    out.append("### Findings")
    out.append("")
    if not doc["findings"]:
        out.append("None.")
    for f in doc["findings"]:
        where = f" on {_code(f['endpoint'], in_table=False)}" if len(doc["endpoints"]) > 1 else ""
        out.append(
            f"- **{_md(f['severity'])}** {_code(f['rule'], in_table=False)}{where}: "
            f"{_md(f['summary'])} "
            f"({_md(_finding_span(f))})"
        )
        for e in f["evidence"]:
            out.append(f"  - {_md(e['name'], starts_line=True)}: {_md(e['value'])}")
        for r in f["recommendations"]:
            out.append(f"  - change: {_change(r, _list_code)} ({_md(why(r))})")
            if r["tradeoff"]:
                out.append(f"  - tradeoff: {_md(r['tradeoff'])}")
        prediction = f.get("prediction")
        if prediction:
            out.append(f"  - predicted: {_md(prediction['line'])}")
            if prediction["verdict"]:
                out.append(f"  - but {_md(prediction['verdict'])}")
            out.extend(f"  - {label}: {_md(said)}" for label, said in search_lines(f))
    checked = check_line(doc)
    if checked:
        out.append("")
        out.append(f"Predicted by {_md(checked)}.")
    for ep in doc["endpoints"]:
        if not ep["knobs"]:
            continue
        out.append("")
        many = len(doc["endpoints"]) > 1
        out.append(
            f"### Configuration of {_code(ep['url'], in_table=False)}"
            if many
            else "### Configuration"
        )
        out.append("")
        out.append("<details><summary>knobs and where each value came from</summary>")
        out.append("")
        out.append("| knob | value | from | detail |")
        out.append("|---|---:|---|---|")
        for name, k in ep["knobs"].items():
            out.append(
                f"| {_code(name)} | {_md(fmt.knob(k['value']))} | {_md(k['provenance'])} | "
                f"{_md(k['detail'])} |"
            )
        out.append("")
        out.append("</details>")
    out.append("")
    out.append(f"<sub>vtop {_md(doc['vtop'])} · report format {doc['report_version']}</sub>")
    return "\n".join(out) + "\n"
