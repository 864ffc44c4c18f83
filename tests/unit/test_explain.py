"""Recommendations in words and numbers (issue 18): the arithmetic, not the raw formula.

`vtop.triage.explain` walks a formula's syntax tree and says what each step did with this
evaluation's numbers. Here: the wording of each step on the shipped rules' own formulas, then
the memory-ceiling finding the simulator's scenario gives, through the finding detail (the
TUI's text), every report format, and the JSON, which keeps the raw formula.
"""

from __future__ import annotations

import html
import json
import re
from functools import cache

from tests.ui.scripted import sim_frames
from vtop.model import Finding, Frame
from vtop.report import render
from vtop.report.collect import Collector
from vtop.report.document import Document
from vtop.triage.explain import RULE_MAX, RULE_MIN, explain
from vtop.ui.views import detail

BUDGET = (
    "min(min(ceil_to(demand_p95, 8), floor_to(known(kv_fit, 2 * max_num_seqs), 8), "
    f"max_num_batched_tokens), {RULE_MAX})"
)  # budget-too-small's max_num_seqs, with its max: 4096 bound named as recommend names it


def test_each_step_is_said_with_its_numbers() -> None:
    names = {
        "demand_p95": 97.0,
        "kv_fit": 156.4,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 2048,
        RULE_MAX: 4096,
    }
    assert explain(BUDGET, names) == (
        "demand p95 (running + waiting) = 97 → rounded up to a multiple of 8: 104; "
        "sequences the KV pool fits at 90% = 156.4 → rounded down to a multiple of 8: 152; "
        "the smallest of 104, 152, max_num_batched_tokens 2048 and the rule's maximum 4096: 104"
    )


def test_an_unknown_input_says_what_stood_in_for_it() -> None:
    names = {
        "demand_p95": 97.0,
        "kv_fit": None,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 2048,
        RULE_MAX: 4096,
    }
    said = explain(BUDGET, names)
    assert "2 × max_num_seqs 64 = 128 (sequences the KV pool fits at 90% unknown)" in said
    assert said.endswith(
        "the smallest of 104, 128, max_num_batched_tokens 2048 and the rule's maximum 4096: 104"
    )


def test_a_named_bound_that_does_not_bind_is_quiet_and_one_that_binds_says_what_it_is() -> None:
    quiet = explain(f"max(ceil_to(demand_p95, 8), {RULE_MIN})", {"demand_p95": 97.0, RULE_MIN: 1})
    assert quiet == "demand p95 (running + waiting) = 97 → rounded up to a multiple of 8: 104"
    binds = explain(f"min(ceil_to(demand_p95, 8), {RULE_MAX})", {"demand_p95": 97.0, RULE_MAX: 64})
    assert binds.endswith("the smallest of 104 and the rule's maximum 64: 64")


def test_a_rule_value_is_explained_first_under_its_label_and_a_bound_that_does_not_bind_is_quiet() -> (
    None
):
    said = explain(
        "max(floor_to(fit_after, 8) if fit_after >= 16 else floor(fit_after), 1)",
        {"fit_after": 104.6, "kv_fit": 52.3, "kv_cache_dtype": "auto"},
        labels={"fit_after": "sequences the pool fits with FP8"},
        defs={"fit_after": "kv_fit * (2 if kv_cache_dtype == 'auto' else 1)"},
    )
    assert said == (
        "sequences the pool fits with FP8 = sequences the KV pool fits at 90% 52.3 × 2 "
        "(as kv_cache_dtype is 'auto') = 104.6; 104.6 → rounded down to a multiple of 8: 104"
    )
    fp8 = explain(
        "kv_fit * (2 if kv_cache_dtype == 'auto' else 1)", {"kv_fit": 52.0, "kv_cache_dtype": "fp8"}
    )
    assert fp8 == "sequences the KV pool fits at 90% 52 × 1 (as kv_cache_dtype is not 'auto') = 52"


def test_a_constant_needs_no_words() -> None:
    assert explain("'fp8'", {}) == "" and explain("True", {}) == ""


@cache
def memory_ceiling() -> tuple[Finding, Document]:
    frames: tuple[Frame, ...] = sim_frames("memory-ceiling", 301)
    collector = Collector(source_kind="demo", source_name="memory-ceiling")
    for frame in frames:
        collector.add(frame)
    (view,) = collector.monitor.endpoints.values()
    (finding,) = [f for f in view.findings if f.rule == "memory-ceiling"]
    return finding, collector.document()


WORDS = re.compile(
    r"sequences the pool fits with the FP8 KV cache recommended beside it = sequences the KV "
    r"pool fits at 90% [\d.]+ × 2 = [\d.]+; [\d.]+ → rounded "
    r"down to a multiple of 8: \d+"
)


def test_the_detail_says_down_from_and_the_arithmetic_and_the_formula_first() -> None:
    """At 80x24 the change and the formula that gave its value come first (`Change`), the
    arithmetic in words below, over each flag's inputs."""
    finding, _ = memory_ceiling()
    (rec,) = [r for r in finding.recommendations if r.knob == "max_num_seqs"]
    assert rec.direction == "lower" and rec.change == "down from 256"
    lines = detail.lines(finding)
    head = [i for i, line in enumerate(lines) if line.startswith(f"  {rec.flag}")]
    # once in the change at the top, once over its arithmetic below
    assert [lines[i] for i in head] == [f"  {rec.flag}    (down from 256; confidence high)"] * 2
    first, below = head
    assert lines[first + 1] == f"    formula   {rec.formula}"  # right under the change
    assert lines.index("Evidence") > first
    block = lines[below : below + 12]
    why = [line for line in block if line.startswith("    why       ")]
    assert len(why) == 1 and WORDS.search(why[0]), block
    assert "'fp8'" not in "\n".join(lines)  # a constant formula is not shown at all


def test_every_report_format_says_it_in_words_and_the_json_keeps_the_formula() -> None:
    _, doc = memory_ceiling()
    (f,) = [f for f in doc["findings"] if f["rule"] == "memory-ceiling"]
    recs = {r["knob"]: r for r in f["recommendations"]}
    seqs = recs["max_num_seqs"]
    assert (
        seqs["formula"] == "max(floor_to(fit_after, 8) if fit_after >= 16 else floor(fit_after), 1)"
    )
    assert seqs["change"] == "down from 256" and WORDS.search(seqs["explanation"])
    assert (
        recs["kv_cache_dtype"]["formula"] == "'fp8'" and recs["kv_cache_dtype"]["explanation"] == ""
    )
    flag = seqs["flag"]
    # The flag once, then why: the engine argument (max_num_seqs=104) beside it said it again.
    for fmt in ("text", "markdown", "html"):
        out = " ".join(html.unescape(re.sub("<[^>]+>", "", render(doc, fmt))).split())
        assert re.search(re.escape(flag) + r"\S* \(down from 256; ", out), fmt
        assert seqs["engine_arg"] not in out, fmt
        assert WORDS.search(out), fmt
        assert "floor_to(" not in out and "'fp8'" not in out, fmt
    assert json.loads(render(doc, "json"))["findings"] == doc["findings"]
