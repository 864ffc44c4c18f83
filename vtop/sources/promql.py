"""PromQL text that vtop sends to Prometheus: selectors, matchers, and the one poll query.

The queries are built from the signal catalog, never from a second list of names: every wire
name vtop understands (`catalog.WIRE`, all aliases of every vLLM version, the dcgm-exporter
fields) goes into one `__name__` alternation, so Prometheus returns exactly what `PageReader`
will route and nothing it would skip. Prometheus turns an alternation of literal names into
a set lookup on its index, so the query costs what the matching series cost.

`--match` takes label matchers (`{job="vllm",namespace="prod"}`) and checks them here, so a
typo is one line on the command line rather than a Prometheus parse error after start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from vtop import durations
from vtop.signals.catalog import WIRE

SCRAPE_TIME = "vtop_scrape_timestamp"
"""Name given to `timestamp(up)`: the time of each target's latest scrape."""

TARGET_LABELS = ("job", "instance")
"""Labels Prometheus adds that say which target a series came from (not part of a page)."""

_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\\n]|\\.)*)"\s*(,|$)')


class MatchError(ValueError):
    """A `--match` selector that is not a list of label matchers; the message is one line."""


def parse_match(text: str) -> tuple[str, ...]:
    """`{job="vllm", env!="dev"}` (braces optional) -> ('job="vllm"', 'env!="dev"')."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    elif body.startswith("{") or body.endswith("}"):
        raise MatchError(f"--match {text!r}: unbalanced braces")
    if not body.strip():
        return ()
    out: list[str] = []
    pos = 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if m is None:
            raise MatchError(
                f'--match {text!r}: expected label matchers like {{job="vllm"}} '
                f"(name, one of = != =~ !~, a double-quoted value) at {body[pos : pos + 20]!r}"
            )
        name, op, value, _ = m.groups()
        if name == "__name__":
            raise MatchError(f"--match {text!r}: give label matchers only, not a metric name")
        out.append(f'{name}{op}"{value}"')
        pos = m.end()
        if m.group(4) == "" and pos < len(body):
            raise MatchError(f"--match {text!r}: matchers must be separated by commas")
    return tuple(out)


def quote(value: str) -> str:
    """A PromQL double-quoted string literal: vtop's one quoter, for the queries it sends
    and for the rules it exports (`vtop.triage.promql`).

    PromQL's strings follow Go's escaping rules (Prometheus's "String literals"; its parser
    unquotes them with Go's `strconv.Unquote`): inside double quotes a backslash begins an
    escape, a bare `"` ends the string, and a raw newline is refused ("unterminated quoted
    string"). Escaping those three is all a literal needs; every other character, control
    characters included, stands for itself.
    """
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def regex_escape(text: str) -> str:
    """Escape `text` for an RE2 regex (Prometheus's `=~`), before string quoting."""
    return re.sub(r"([.\\+*?\[\]^$(){}|-])", r"\\\1", text)


def selector(name: str | None, matchers: Iterable[str]) -> str:
    """`name{m1,m2}`; `name` None means no metric name (the matchers must select)."""
    inner = ",".join(matchers)
    if name is None:
        return "{" + inner + "}"
    return f"{name}{{{inner}}}" if inner else name


def wire_names(*, gpu: bool) -> list[str]:
    """Every catalog wire name, vLLM's (and the API server's process_*) or dcgm-exporter's."""
    return sorted(n for n in WIRE if n.startswith("DCGM_") == gpu)


def names_matcher(names: Sequence[str]) -> str:
    return "__name__=~" + quote("|".join(regex_escape(n) for n in names))


def target_query(matchers: Sequence[str], hosts: Sequence[str] = ()) -> str:
    """The one query that reads every target's latest scrape.

    Per target it returns every catalog series, `up`, `scrape_duration_seconds`, and the
    scrape's own time (`timestamp(up)`, renamed `vtop_scrape_timestamp`); then the
    dcgm-exporter series of the nodes in `hosts` (matched by the host part of their
    `instance`, or their `Hostname` label).
    """
    names = [*wire_names(gpu=False), "up", "scrape_duration_seconds"]
    parts = [
        selector(None, [names_matcher(names), *matchers]),
        # `or` matches label sets without the metric name: the scrape time needs a label of
        # its own, or `up` (same job and instance) would hide it.
        f'label_replace(label_replace(timestamp({selector("up", matchers)}), "__name__", '
        f'"{SCRAPE_TIME}", "", ""), "vtop", "scrape_time", "", "")',
    ]
    if hosts:
        gpu = names_matcher(wire_names(gpu=True))
        alt = "|".join(regex_escape(h) for h in sorted(set(hosts)))
        parts.append(selector(None, [gpu, "instance=~" + quote(f"({alt})(:[0-9]+)?")]))
        parts.append(selector(None, [gpu, "Hostname=~" + quote(alt)]))
    return " or ".join(parts)


def instances_query(matchers: Sequence[str], window_s: float) -> str:
    """The targets that served vLLM series within the window: one sample per (job, instance)."""
    running = selector("vllm:num_requests_running", matchers)
    return f"group by (job, instance) (last_over_time({running}[{durations.exact(window_s)}]))"


def host_of(instance: str) -> str:
    """`10.0.0.5:8000` -> `10.0.0.5`; `[::1]:8000` -> `::1`; no port -> as is."""
    if instance.startswith("["):
        end = instance.find("]")
        return instance[1:end] if end > 0 else instance
    head, sep, tail = instance.rpartition(":")
    return head if sep and tail.isdigit() and ":" not in head else instance
