"""What a newcomer read as carelessness (issue 29), held in the reports of the shipped traces:
a change printed once, a knob's source that does not repeat its provenance, a bound that says
what it is, and Markdown tables that each have a real header row.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.fakerules import kv_full
from vtop.report import render
from vtop.report.run import replay_document
from vtop.sim.twin import Twin
from vtop.sources.sim import twin_knobs
from vtop.trace.reader import TraceReader

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "traces"


@cache
def report(name: str) -> Any:
    """The report of a shipped trace (`traces/NAME.vtrace`), or of a golden one."""
    path = TRACES / f"{name}.vtrace"
    if path.is_file():
        return replay_document(str(path))
    return replay_document(str(ROOT / "tests" / "golden" / f"{name}.vtrace"), findings=kv_full)


def tables(markdown: str) -> list[list[str]]:
    """Each Markdown table's lines: a run of lines that start with `|`."""
    out: list[list[str]] = []
    previous = False
    for line in markdown.splitlines():
        row = line.startswith("|")
        if row and not previous:
            out.append([])
        if row:
            out[-1].append(line)
        previous = row
    return out


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.mark.parametrize("name", ["memory-ceiling", "budget-too-small", "kv-pressure"])
def test_every_markdown_table_has_a_header_row_with_every_cell_named(name: str) -> None:
    found = tables(render(report(name), "markdown"))
    assert len(found) >= 3  # the scope, the signals, the configuration at least
    for table in found:
        head, rule = cells(table[0]), cells(table[1])
        assert all(head), table[0]  # GitHub's Markdown renders an empty header as a blank bar
        assert len(rule) == len(head) and all(re.fullmatch(r":?-{3,}:?", c) for c in rule)


DOCS = sorted(
    [
        *ROOT.joinpath("docs").glob("*.md"),
        ROOT / "CONTRIBUTING.md",
        ROOT / "rules" / "README.md",
        ROOT / "traces" / "README.md",
    ]
)


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_table_of_the_docs_has_a_header_row_too(path: Path) -> None:
    for table in tables(path.read_text(encoding="utf-8")):
        assert all(cells(table[0])), f"{path.name}: {table[0]}"


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_a_change_is_its_flag_once_with_what_it_moves_from(fmt: str) -> None:
    doc = report("memory-ceiling")
    out = render(doc, fmt)
    recs = [r for f in doc["findings"] for r in f["recommendations"]]
    assert recs
    for r in recs:
        assert r["engine_arg"] not in out  # `max_num_seqs=104` beside `--max-num-seqs 104`
        shown = f"`{r['flag']}`" if fmt == "markdown" else r["flag"]
        assert shown in out
    assert "(now auto)" in out  # what is not said twice stays: the value it replaces


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_a_change_that_costs_something_says_what_in_every_format(fmt: str) -> None:
    """The rule's tradeoff beside its change (FP8 KV: a small accuracy cost, a GPU that
    supports it): the screen showed it, the report's text, Markdown and HTML did not."""
    doc = report("memory-ceiling")
    out = render(doc, fmt)
    costs = [r["tradeoff"] for f in doc["findings"] for r in f["recommendations"] if r["tradeoff"]]
    assert costs
    for cost in costs:
        words = " ".join(cost.split()[:6])  # before any wrap, escape or Markdown mark
        assert words in " ".join(out.split()), words
    assert ("tradeoff  " if fmt == "text" else "tradeoff:") in out


@pytest.mark.parametrize("name", ["budget-too-small", "ttft-queueing"])
def test_a_recommendations_bound_says_what_it_is(name: str) -> None:
    """`the smallest of 64, 280, max_num_batched_tokens 2048 and 4096`: 4096 was the rule's
    `max:`, never named."""
    (said,) = [
        r["explanation"]
        for f in report(name)["findings"]
        for r in f["recommendations"]
        if r["knob"] == "max_num_seqs"
    ]
    assert "and the rule's maximum 4096: " in said
    assert not re.search(r"(?<!maximum) 4096\b", said)


def test_a_simulated_knob_names_its_flag_not_its_provenance_again() -> None:
    """Provenance `process` already says "from the server's command line"; the detail says
    which flag, as a real server's does (`pid 7 command line --port`)."""
    knobs = twin_knobs(Twin("prefix-cache-ineffective"))
    assert knobs["max_num_seqs"].detail == "simulated server's --max-num-seqs"
    assert knobs["enable_prefix_caching"].detail == "simulated server's --no-enable-prefix-caching"
    assert all("command line" not in k.detail for k in knobs.values())


def test_the_shipped_simulated_traces_carry_the_same_words() -> None:
    """The example traces were recorded from the twin: their knobs read as a demo's do."""
    for path in sorted(TRACES.glob("*.vtrace")):
        with TraceReader(path) as reader:
            details = {
                k.detail
                for frame in reader.frames()
                for s in frame.scrapes
                for k in (s.knobs or {}).values()
                if k.provenance == "process"
            }
        assert details, path.name
        assert not any(d.startswith("simulated server's command line") for d in details), path.name
