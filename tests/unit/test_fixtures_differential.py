"""Every fixture page, read by vtop, gives exactly what prometheus-client's parser gives.

The reference side parses with prometheus-client's own text parser and maps samples onto
canonical series with the plainest possible code (no caching, no fast path); vtop's side is
the production PageReader. Any difference in splitting, escapes, label handling, alias choice
or merging shows up here, on real pages captured from vLLM and on the dialects derived from
them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from vtop.model import Scrape, SeriesKey
from vtop.signals.catalog import WIRE, Kind
from vtop.signals.extract import PageReader, clean_label

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
PAGES = sorted(p for p in FIXTURES.rglob("*.txt") if p.is_file() and p.name != "log-lines.txt")


HistTuple = tuple[tuple[float, ...], tuple[float, ...], float, float | None]
"""A histogram as (bounds, cumulative counts per bound, count, sum or None)."""


@dataclass
class HistParts:
    """One histogram's samples as the page gives them, before they are put together."""

    buckets: defaultdict[float, float] = field(default_factory=lambda: defaultdict(float))
    count: float | None = None
    sum: float | None = None


def reference(text: str) -> tuple[dict[SeriesKey, float], dict[SeriesKey, HistTuple]]:
    """Canonical scalars and histograms via prometheus-client, the slow obvious way."""
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value  # duplicates: last wins
    scalar_parts: dict[SeriesKey, dict[int, list[tuple[bool, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    hist_parts: dict[SeriesKey, dict[int, HistParts]] = defaultdict(dict)
    for (name, labels), value in samples.items():
        route = WIRE.get(name)
        if route is None or not math.isfinite(value):
            continue
        sig = route.signal
        if sig.kind is Kind.INFO:
            continue
        lab = dict(labels)
        key = SeriesKey(
            sig.name,
            clean_label(lab.pop("model_name", "")),
            clean_label(lab.pop("engine", "")),
            clean_label(lab.pop(sig.label, "")) if sig.label else "",
        )
        le = lab.pop("le", None) if route.part == "bucket" else None
        extra = bool(lab)
        if sig.kind is Kind.HISTOGRAM:
            parts = hist_parts[key].setdefault(route.rank, HistParts())
            if route.part == "bucket":
                assert le is not None, f"{name}: a bucket without le"
                parts.buckets[float(le)] += value
            elif route.part == "count":
                parts.count = (parts.count or 0.0) + value
            elif route.part == "sum":
                parts.sum = (parts.sum or 0.0) + value
        else:
            scalar_parts[key][route.rank].append((extra, value * sig.scale))
    scalars: dict[SeriesKey, float] = {}
    for key, by_rank in scalar_parts.items():
        values = by_rank[min(by_rank)]
        plain = [v for extra, v in values if not extra]
        merged = [v for extra, v in values if extra]
        sig = WIRE_BY_SIGNAL[key.signal]
        if merged:
            combine = sum if sig.kind is Kind.COUNTER else max
            scalars[key] = combine(merged + plain[-1:])
        else:
            scalars[key] = plain[-1]
    hists: dict[SeriesKey, HistTuple] = {}
    for key, ranks in hist_parts.items():
        parts = ranks[min(ranks)]
        buckets = dict(parts.buckets)
        inf = buckets.pop(math.inf, None)
        count = inf if inf is not None else parts.count
        if count is None:
            continue
        bounds = tuple(sorted(buckets))
        hists[key] = (bounds, tuple(buckets[b] for b in bounds), count, parts.sum)
    return scalars, hists


WIRE_BY_SIGNAL = {r.signal.name: r.signal for r in WIRE.values()}


def test_there_are_real_and_derived_fixtures() -> None:
    names = {p.parent.name for p in PAGES}
    assert "vllm-0.32" in names and "derived" in names
    assert len(PAGES) >= 12


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_vtop_reads_what_prometheus_client_reads(page: Path) -> None:
    text = page.read_text()
    scrape = PageReader().read(text, endpoint="e", t=0.0)
    want_scalars, want_hists = reference(text)
    assert scrape.scalars == pytest.approx(want_scalars)
    got = {
        k: (h.bounds, h.buckets, h.count, None if math.isnan(h.sum) else h.sum)
        for k, h in scrape.histograms.items()
    }
    assert got == want_hists


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_second_read_with_warm_caches_is_identical(page: Path) -> None:
    text = page.read_text()
    reader = PageReader()
    first = reader.read(text, endpoint="e", t=0.0)
    second = reader.read(text, endpoint="e", t=1.0)
    assert first.scalars == second.scalars and first.histograms == second.histograms


def read(rel: str) -> Scrape:
    return PageReader().read((FIXTURES / rel).read_text(), endpoint="e", t=0.0)


def test_v0_dialect_maps_onto_canonical_names() -> None:
    sc = read("derived/v0-0.6.txt")
    signals = {k.signal for k in sc.scalars} | {k.signal for k in sc.histograms}
    assert {"kv_usage", "swapped", "cpu_cache_usage", "running", "waiting", "itl",
            "generation_throughput_v0"} <= signals  # fmt: skip
    assert all(k.engine == "" for k in sc.scalars)
    assert "prefix_cache_queries" not in signals


def test_0_10_prefers_the_new_kv_name_and_reads_the_old_itl_name() -> None:
    sc = read("derived/v1-0.10.txt")
    assert any(k.signal == "itl" for k in sc.histograms)
    kv = [v for k, v in sc.scalars.items() if k.signal == "kv_usage"]
    assert len(kv) == 1


def test_early_v1_prefix_cache_names() -> None:
    sc = read("derived/v1-0.8-no-engine.txt")
    assert any(k.signal == "prefix_cache_queries" for k in sc.scalars)


def test_data_parallel_engines_are_separate_series() -> None:
    sc = read("derived/dp-4-engines.txt")
    engines = {k.engine for k in sc.scalars if k.signal == "running"}
    assert engines == {"0", "1", "2", "3"}


def test_multiprocess_pid_labels_fold_into_one_series() -> None:
    sc = read("derived/multiprocess-pid.txt")
    running = [k for k in sc.scalars if k.signal == "running"]
    assert len(running) == 1
    assert sc.info.get("block_size")


def test_negative_kv_is_kept_for_the_ui_to_flag() -> None:
    sc = read("derived/negative-kv.txt")
    assert [v for k, v in sc.scalars.items() if k.signal == "kv_usage"] == [-0.021]


def test_disable_log_stats_and_help_only_pages_have_no_vllm_series() -> None:
    assert not read("vllm-0.32/disable-log-stats.txt").has_vllm_series
    assert not read("derived/help-without-samples.txt").has_vllm_series
