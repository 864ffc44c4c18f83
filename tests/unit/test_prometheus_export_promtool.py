"""The exported alerting rules under `promtool test rules`: Prometheus's own rule engine on
synthetic series, the way tests/rules test vtop's engine.

What only a real rule engine can show: `for` and `keep_firing_for`, the escalation to
critical as a second alert, and the recovery thresholds, which the export builds from the
alert's own `ALERTS` state. The series are written with vLLM's wire names and labels, as a
real server's page would have them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.prom import MISSING, PROMTOOL
from vtop.triage.engine import Engine
from vtop.triage.promql import Options, export, rule_file

if MISSING:
    if os.environ.get("VTOP_REQUIRE_PROMETHEUS"):
        raise RuntimeError(MISSING)
    pytest.skip(MISSING, allow_module_level=True)

TARGET = {"job": "vllm", "instance": "10.0.0.5:8000"}
RULES = ("memory-ceiling", "budget-too-small", "past-sweet-spot")
PAGE = 'engine="0",instance="10.0.0.5:8000",job="vllm",model_name="m"'


def series(name: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{PAGE}}}", "values": values}


def expected(rules: dict[str, Any], alert: str, severity: str) -> dict[str, Any]:
    """The alert promtool should see: the rule's labels and its annotations, templated."""
    rule = next(r for r in rules["groups"][0]["rules"]
                if r["alert"] == alert and r["labels"]["severity"] == severity)  # fmt: skip
    ann = dict(rule["annotations"])
    ann["summary"] = ann["summary"].replace("{{ $labels.instance }}", TARGET["instance"])
    return {"exp_labels": {**rule["labels"], **TARGET}, "exp_annotations": ann}


def promtool_test(
    tmp_path: Path, tests: list[dict[str, Any]], ids: tuple[str, ...] = RULES
) -> tuple[dict[str, Any], str]:
    options = Options(knobs={"max_num_seqs": 64, "kv_capacity_tokens": 20000})
    catalog = [r for r in Engine.from_catalog(user=False).rules if r.id in ids]
    text = rule_file(export(catalog, options))
    (tmp_path / "vtop.rules.yml").write_text(text)
    rules = yaml.safe_load(text)
    for t in tests:
        t["_expect"](rules, t)
        del t["_expect"]
    # rules every 5 s (their subqueries sample at that step), series every second
    doc = {"rule_files": ["vtop.rules.yml"], "evaluation_interval": "5s", "tests": tests}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
    assert PROMTOOL is not None
    run = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    return rules, run.stdout + run.stderr


KV_FULL_BELOW_CAP = [
    series("vllm:num_requests_running", "40x600"),
    series("vllm:num_requests_waiting", "20x600"),
    series("vllm:generation_tokens_total", "0+400x600"),
]


def test_memory_ceiling_fires_after_for_escalates_and_holds_on_its_recovery_level(
    tmp_path: Path,
) -> None:
    def expect_warning(rules: dict[str, Any], t: dict[str, Any]) -> None:
        warn = expected(rules, "VtopMemoryCeiling", "warning")
        t["alert_rule_test"] = [
            # condition from the start (windows see the data there is), 30 s `for`
            {"eval_time": "20s", "alertname": "VtopMemoryCeiling", "exp_alerts": []},
            {"eval_time": "2m", "alertname": "VtopMemoryCeiling", "exp_alerts": [warn]},
            # KV p50 falls to 0.85: under the firing level 0.9, above the recovery level 0.8
            {"eval_time": "5m30s", "alertname": "VtopMemoryCeiling", "exp_alerts": [warn]},
            # KV at 0.5 from 6m: the 2-min median drops below 0.8 near 7m, then keep_firing_for 1m
            {"eval_time": "7m30s", "alertname": "VtopMemoryCeiling", "exp_alerts": [warn]},
            {"eval_time": "9m30s", "alertname": "VtopMemoryCeiling", "exp_alerts": []},
        ]

    def expect_critical(rules: dict[str, Any], t: dict[str, Any]) -> None:
        both = [expected(rules, "VtopMemoryCeiling", s) for s in ("warning", "critical")]
        t["alert_rule_test"] = [
            {"eval_time": "3m", "alertname": "VtopMemoryCeiling", "exp_alerts": both},
        ]

    tests = [
        {"interval": "1s", "_expect": expect_warning, "input_series": [
            *KV_FULL_BELOW_CAP,
            series("vllm:kv_cache_usage_perc", "0.95x180 0.85x180 0.5x240"),
            series("vllm:num_preemptions_total", "0x600"),
        ]},
        # 2 preemptions/s: critical (vLLM's dashboard red is 1/s), warning alongside
        {"interval": "1s", "_expect": expect_critical, "input_series": [
            *KV_FULL_BELOW_CAP,
            series("vllm:kv_cache_usage_perc", "0.96x600"),
            series("vllm:num_preemptions_total", "0+2x600"),
        ]},
    ]  # fmt: skip
    _, out = promtool_test(tmp_path, tests)
    assert "SUCCESS" in out, out


def test_a_queue_behind_the_cap_is_budget_too_small_not_memory(tmp_path: Path) -> None:
    def expect(rules: dict[str, Any], t: dict[str, Any]) -> None:
        t["alert_rule_test"] = [
            {"eval_time": "4m", "alertname": "VtopBudgetTooSmall",
             "exp_alerts": [expected(rules, "VtopBudgetTooSmall", "warning")]},
            {"eval_time": "4m", "alertname": "VtopMemoryCeiling", "exp_alerts": []},
        ]  # fmt: skip

    tests = [{"interval": "1s", "_expect": expect, "input_series": [
        series("vllm:num_requests_running", "64x300"),  # at max_num_seqs 64 (--knob)
        series("vllm:num_requests_waiting", "30x300"),
        series("vllm:kv_cache_usage_perc", "0.4x300"),
        series("vllm:num_preemptions_total", "0x300"),
        series("vllm:generation_tokens_total", "0+900x300"),
    ]}]  # fmt: skip
    _, out = promtool_test(tmp_path, tests)
    assert "SUCCESS" in out, out


def test_the_replica_with_the_full_kv_alerts_and_its_empty_peer_and_a_lone_model_do_not(
    tmp_path: Path,
) -> None:
    def on(instance: str, model: str, name: str, values: str) -> dict[str, str]:
        labels = f'engine="0",instance="{instance}",job="vllm",model_name="{model}"'
        return {"series": f"{name}{{{labels}}}", "values": values}

    def expect(rules: dict[str, Any], t: dict[str, Any]) -> None:
        t["alert_rule_test"] = [
            # the 2-min median crosses at once (the subquery sees the data there is); for 1m
            {"eval_time": "50s", "alertname": "VtopReplicaImbalance", "exp_alerts": []},
            # only on 10.0.0.5: not on its empty peer, nor on the full server of another model
            {"eval_time": "4m", "alertname": "VtopReplicaImbalance",
             "exp_alerts": [expected(rules, "VtopReplicaImbalance", "warning")]},
        ]  # fmt: skip

    full, empty, alone = "10.0.0.5:8000", "10.0.0.6:8000", "10.0.0.7:8000"
    tests = [{"interval": "1s", "_expect": expect, "input_series": [
        on(full, "m", "vllm:num_requests_running", "40x300"),
        on(full, "m", "vllm:kv_cache_usage_perc", "0.98x300"),
        on(empty, "m", "vllm:num_requests_running", "3x300"),
        on(empty, "m", "vllm:kv_cache_usage_perc", "0.12x300"),
        on(full, "m", "vllm:num_requests_waiting", "6x300"),
        on(empty, "m", "vllm:num_requests_waiting", "0x300"),
        on(alone, "other", "vllm:num_requests_waiting", "6x300"),
        on(alone, "other", "vllm:num_requests_running", "40x300"),
        on(alone, "other", "vllm:kv_cache_usage_perc", "0.98x300"),
    ]}]  # fmt: skip
    _, out = promtool_test(tmp_path, tests, ("replica-imbalance",))
    assert "SUCCESS" in out, out


def test_a_test_that_should_fail_does(tmp_path: Path) -> None:
    """The harness can fail: expecting memory-ceiling on a healthy server is an error."""

    def expect(rules: dict[str, Any], t: dict[str, Any]) -> None:
        t["alert_rule_test"] = [{"eval_time": "3m", "alertname": "VtopMemoryCeiling",
                                 "exp_alerts": [expected(rules, "VtopMemoryCeiling", "warning")]}]  # fmt: skip

    tests = [{"interval": "1s", "_expect": expect, "input_series": [
        series("vllm:num_requests_running", "10x300"),
        series("vllm:num_requests_waiting", "0x300"),
        series("vllm:kv_cache_usage_perc", "0.3x300"),
        series("vllm:num_preemptions_total", "0x300"),
    ]}]  # fmt: skip
    _, out = promtool_test(tmp_path, tests)
    assert "SUCCESS" not in out and "FAILED" in out
