"""Rule files: precise one-line errors, overrides by id, and a user directory."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vtop.triage.loader import load_catalog, load_paths, load_text, shipped_dir

GOOD = """\
id: my-rule
title: A rule
severity: warning
when:
  quantile_over_time: kv_usage
  q: 0.5
  window: 2m
  at_least: 0.9
  clear_below: 0.8
summary: "KV {kv:.0%}"
values:
  kv: {quantile_over_time: kv_usage, q: 0.5, window: 2m}
"""


def errors(text: str) -> list[str]:
    return [str(e) for e in load_text(textwrap.dedent(text), "r.yaml").errors]


def test_a_good_rule_loads() -> None:
    loaded = load_text(GOOD, "r.yaml")
    assert not loaded.errors
    rule = loaded.rules["my-rule"]
    assert rule.line == 1
    assert rule.for_s == 0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("kv_usage\n  q", "kv_usag\n  q"), "r.yaml:5: my-rule: unknown signal 'kv_usag'"),
        (("window: 2m\n  at_least", "window: 2x\n  at_least"), "r.yaml:7: my-rule: window:"),
        (("at_least: 0.9", "at_least: 0.9 * max_num_sqs"), "r.yaml:8: my-rule: at_least:"),
        (("severity: warning", "severity: loud"), "r.yaml:3: my-rule: severity is one of"),
        (
            ("q: 0.5\n  window: 2m\n  at", "q: 5\n  window: 2m\n  at"),
            "r.yaml:6: my-rule: quantile_over_time: needs q",
        ),
        (
            ("quantile_over_time: kv_usage\n  q: 0.5", "rate: kv_usage"),
            "r.yaml:5: my-rule: rate: 'kv_usage' is a gauge",
        ),
        (('"KV {kv:.0%}"', '"KV {kvv}"'), "r.yaml:10: my-rule: summary: unknown name 'kvv'"),
        (('"KV {kv:.0%}"', '"KV {kv.__class__}"'), "r.yaml:10: my-rule: summary: placeholder"),
        (("title: A rule", "title: A rule\ncolour: red"), "r.yaml:3: my-rule: unknown key"),
        (("title: A rule", "title: A rule\ntitle: Again"), "r.yaml:3: my-rule: duplicate key"),
        (("title: A rule", "title: [A rule"), "r.yaml:3: my-rule: invalid YAML"),
        (
            ("title: A rule", "title: A rule\nrequires: {samples: 30}"),
            "r.yaml:3: my-rule: requires: samples is now evidence, in seconds",
        ),
        (
            ("title: A rule", "title: A rule\ndecisive: {evidence: 10s}"),
            "r.yaml:3: my-rule: decisive: expected {evidence: DURATION, when: CONDITION}",
        ),
        (
            (
                "title: A rule",
                "title: A rule\ndecisive: {evidence: 0s, when: {last: running, above: 1}}",
            ),
            "r.yaml:3: my-rule: decisive: evidence must be positive",
        ),
        (
            ("window: 2m\n  at_least", "window: since_start\n  at_least"),
            "r.yaml:7: my-rule: quantile_over_time: window since_start takes a counter",
        ),
    ],
)
def test_errors_name_file_line_and_rule(change: tuple[str, str], expected: str) -> None:
    old, new = change
    assert old in GOOD
    errs = errors(GOOD.replace(old, new, 1))
    assert len(errs) == 1, errs
    assert errs[0].startswith(expected), errs[0]
    assert "\n" not in errs[0]


def test_a_fast_path_and_the_servers_own_history_load() -> None:
    text = GOOD + textwrap.dedent("""\
        requires: {evidence: 90s, finished: 5}
        decisive:
          evidence: 10s
          when:
            all:
              - {min_over_time: kv_usage, window: 10s, at_least: 0.95}
              - {rate: preemptions, window: since_start, at_least: 0.05}
              - {value: queue_share_of_ttft, window: since_start, at_least: 0.7}
        """)
    loaded = load_text(text, "r.yaml")
    assert not loaded.errors, loaded.errors
    rule = loaded.rules["my-rule"]
    assert (rule.requires.evidence_s, rule.requires.finished) == (90.0, 5)
    assert rule.decisive is not None and rule.decisive.evidence_s == 10.0
    gauge_at_start = text.replace(
        "queue_share_of_ttft, window: since_start", "demand_dispersion, window: since_start"
    )
    assert "window since_start takes a counter" in errors(gauge_at_start)[0]


def test_histograms_and_counters_take_their_functions() -> None:
    bad = GOOD.replace("quantile_over_time: kv_usage\n  q: 0.5", "avg_over_time: ttft")
    assert "histogram" in errors(bad)[0]
    ok = GOOD.replace(
        "quantile_over_time: kv_usage\n  q: 0.5", "histogram_quantile: ttft\n  q: 0.9"
    )
    assert errors(ok) == []


def test_one_broken_rule_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text(GOOD.replace("my-rule", "other").replace("kv_usage\n", "x\n"))
    loaded = load_paths([tmp_path])
    assert list(loaded.rules) == ["my-rule"]
    assert len(loaded.errors) == 1
    assert loaded.errors[0].rule == "other"


def test_user_rules_override_shipped_ones_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "vtop" / "rules"
    user.mkdir(parents=True)
    (user / "mine.yaml").write_text(GOOD.replace("my-rule", "underloaded"))
    (user / "off.yaml").write_text("id: tensor-parallel-oversized\nenabled: false\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    shipped = load_catalog(user=False).rules
    loaded = load_catalog()
    assert not loaded.errors
    assert loaded.rules["underloaded"].title == "A rule"
    assert "tensor-parallel-oversized" not in loaded.rules
    assert loaded.disabled == {"tensor-parallel-oversized"}
    assert set(loaded.rules) == set(shipped) - {"tensor-parallel-oversized"}
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "x.yaml").write_text(GOOD.replace("my-rule", "underloaded").replace("A rule", "B"))
    assert load_catalog([extra]).rules["underloaded"].title == "B"


def test_explains_must_name_a_rule(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD + "explains: [no-such-rule]\n")
    loaded = load_catalog([tmp_path], user=False)
    assert [e.message for e in loaded.errors] == ["explains unknown rule 'no-such-rule'"]


def test_shipped_rules_load_cleanly() -> None:
    loaded = load_catalog(user=False)
    assert loaded.errors == []
    assert len(list(shipped_dir().glob("*.yaml"))) == len(loaded.rules)
