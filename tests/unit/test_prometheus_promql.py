"""The PromQL text vtop sends to Prometheus, and how a result series becomes a page line."""

from __future__ import annotations

import pytest

from vtop import durations
from vtop.signals.catalog import WIRE
from vtop.sources import promql
from vtop.sources.prometheus import PrometheusSource, backfill_step, head
from vtop.sources.status import CONNECTING


def test_match_takes_label_matchers_with_or_without_braces() -> None:
    assert promql.parse_match('{job="vllm", env!="dev"}') == ('job="vllm"', 'env!="dev"')
    assert promql.parse_match('instance=~"10\\\\.0\\\\..*"') == ('instance=~"10\\\\.0\\\\..*"',)
    assert promql.parse_match("") == () and promql.parse_match("{}") == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{job=vllm}", 'expected label matchers like {job="vllm"}'),
        ('{job="vllm"', "unbalanced braces"),
        ('{__name__="x"}', "label matchers only, not a metric name"),
        ('{job="a" env="b"}', "expected label matchers"),
        ("vllm:foo", "expected label matchers"),
    ],
)
def test_a_bad_match_is_one_line(text: str, says: str) -> None:
    with pytest.raises(promql.MatchError) as exc:
        promql.parse_match(text)
    assert says in str(exc.value) and str(exc.value).startswith(f"--match {text!r}")


def test_the_poll_query_asks_for_every_catalog_name_and_the_scrape_time() -> None:
    q = promql.target_query(('job="vllm"',), ["10.0.0.5", "gpu-1.example"])
    for name in WIRE:
        assert name in q  # every alias of every vLLM version, and dcgm-exporter's fields
    assert 'label_replace(label_replace(timestamp(up{job="vllm"}), "__name__"' in q
    assert 'instance=~"(10\\\\.0\\\\.0\\\\.5|gpu\\\\-1\\\\.example)(:[0-9]+)?"' in q
    assert promql.target_query(()).count(" or ") == 1  # no hosts yet: no GPU terms


def test_small_helpers() -> None:
    assert promql.host_of("10.0.0.5:8000") == "10.0.0.5"
    assert promql.host_of("[::1]:8000") == "::1"
    assert promql.host_of("gpu-node") == "gpu-node"
    assert durations.exact(3600) == "1h" and durations.exact(0.5) == "500ms"
    assert durations.parse("1h") == 3600 and durations.parse("90s") == 90
    assert durations.parse("0") == 0
    with pytest.raises(ValueError, match="not a duration"):
        durations.parse("soon")
    assert promql.quote('a"b\\c') == '"a\\"b\\\\c"'
    assert backfill_step(3600) == 15 and backfill_step(86400) == 360


def test_a_series_head_is_the_page_head_without_target_labels() -> None:
    metric = {
        "__name__": "vllm:num_requests_running",
        "engine": "0",
        "instance": "h:1",
        "job": "vllm",
        "model_name": 'q"1\\n',
    }
    assert head(metric) == 'vllm:num_requests_running{engine="0",model_name="q\\"1\\\\n"}'
    assert head({"__name__": "up", "job": "x"}) == "up"


def test_status_before_anything_is_known() -> None:
    src = PrometheusSource("http://user:pw@prom:9090/?token=x")
    assert src.url == "http://prom:9090/?token=…"  # no credentials, no query values
    assert src.status("nope") == CONNECTING
    # URL credentials go as basic auth, never in the URL httpx logs (test_prometheus_client.py)
    assert src.client._api("/api/v1/query") == "http://prom:9090/api/v1/query?token=x"
    behind = PrometheusSource("https://gw.example/prometheus/")
    assert behind.client._api("/api/v1/query") == "https://gw.example/prometheus/api/v1/query"
