"""vtop's exposition parser against prometheus-client's, value for value, on generated pages.

tests/unit/test_fixtures_differential.py compares the two on the pages captured from real
servers; here Hypothesis writes the pages: families with and without HELP and TYPE lines
(HELP text with its escapes), comments and blank lines, any metric and label names the format
allows, label values with every character (quotes, backslashes and newlines escaped as the
format says), values in every spelling (integers, exponents, NaN, ±Inf, negative zero) and
optional timestamps. Two levels are compared:

- every sample (name, labels, value) of any page: `iter_samples` against
  `text_string_to_metric_families`;
- what vtop makes of a vLLM page (canonical scalars and histograms, engines and models apart,
  aliases and merges as the catalog says): the production `PageReader` against the plain
  reference built on prometheus-client in test_fixtures_differential.py.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.test_fixtures_differential import reference
from vtop.signals.catalog import WIRE, Kind
from vtop.signals.extract import PageReader
from vtop.signals.parser import iter_samples

LABEL_NAME = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: not n.startswith("__")
)
LABEL_VALUE = st.text(st.characters(exclude_categories=["Cs"]), max_size=16)
SUFFIX = st.from_regex(r"[a-zA-Z0-9_:]{0,16}", fullmatch=True)


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def spell(value: float, style: int) -> str:
    """One float in one of the spellings exporters use."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if style == 0:
        return repr(value)
    if style == 1 and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if style == 2:
        return f"{value:.6e}"
    return f"{value:g}"


VALUE = st.builds(spell, st.floats(allow_nan=True, allow_infinity=True, width=64),
                  st.integers(0, 3))  # fmt: skip
TIMESTAMP = st.one_of(st.just(""), st.integers(0, 2**42).map(lambda t: f" {t}"))


@st.composite
def labels(draw: st.DrawFn, fixed: tuple[tuple[str, str], ...] = ()) -> str:
    names = draw(st.lists(LABEL_NAME, max_size=4, unique=True))
    pairs = [(n, draw(LABEL_VALUE)) for n in names if n not in dict(fixed)] + list(fixed)
    if not pairs:
        return "" if draw(st.booleans()) else "{}"
    body = ",".join(f'{n}="{escape_label(v)}"' for n, v in pairs)
    return "{" + body + ("," if draw(st.booleans()) else "") + "}"  # a trailing comma or not


@st.composite
def page(draw: st.DrawFn) -> str:
    """A page of untyped and typed families, each with a unique prefix (so no family's name is
    another's plus _total or _bucket), HELP and TYPE lines where drawn, and comments."""
    lines: list[str] = []
    for i in range(draw(st.integers(0, 6))):
        name = f"m{i}_" + draw(SUFFIX)
        kind = draw(st.sampled_from(["untyped", "gauge", "counter", None]))
        if draw(st.booleans()):
            lines.append(f"# HELP {name} {escape_help(draw(st.text(max_size=20)))}")
        if kind is not None:
            lines.append(f"# TYPE {name} {kind}")
        sample = f"{name}_total" if kind == "counter" else name  # as exporters write them
        # (prometheus-client renames a counter's sample that lacks _total; vtop keeps names)
        for _ in range(draw(st.integers(1, 4))):
            lines.append(f"{sample}{draw(labels())} {draw(VALUE)}{draw(TIMESTAMP)}")
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "# a comment", "#", "# HELP"])))
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if draw(st.booleans()) else "")


def same(value: float) -> str:
    """A value's identity for the comparison: equal floats alike (prometheus-client reads "-0"
    as the integer 0, vtop as -0.0), every NaN alike."""
    return repr(float(value) + 0.0)


def client_samples(text: str) -> Counter[tuple[str, tuple[tuple[str, str], ...], str]]:
    return Counter(
        (s.name, tuple(sorted(s.labels.items())), same(s.value))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    )


def vtop_samples(text: str) -> Counter[tuple[str, tuple[tuple[str, str], ...], str]]:
    return Counter((n, tuple(sorted(lab)), same(v)) for n, lab, v in iter_samples(text))


@settings(max_examples=300, deadline=timedelta(seconds=2),
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(page())
def test_every_sample_is_read_as_prometheus_client_reads_it(text: str) -> None:
    assert vtop_samples(text) == client_samples(text)


# -- vLLM pages: what vtop makes of them ---------------------------------------------------------

_BY_FAMILY: dict[str, list[str]] = {}
for _wire, _route in WIRE.items():
    _base = _wire
    for _suffix in ("_bucket", "_sum", "_count", "_total"):
        if _route.part != "value" or _suffix == "_total":
            _base = _base.removesuffix(_suffix)
    _BY_FAMILY.setdefault(_base, []).append(_wire)
FAMILIES = sorted(_BY_FAMILY)


@st.composite
def vllm_page(draw: st.DrawFn) -> str:
    """Families from vLLM's catalog (every version's names), several models and engines, the
    signal's own label, stray extra labels (multiprocess `pid`), histograms with their buckets
    in order, and values in every spelling."""
    lines: list[str] = []
    models = draw(st.lists(st.sampled_from(["qwen", "llama", 'we"ird\\name', ""]), min_size=1,
                           max_size=2, unique=True))  # fmt: skip
    for family in draw(st.lists(st.sampled_from(FAMILIES), max_size=8, unique=True)):
        wires = _BY_FAMILY[family]
        route = WIRE[wires[0]]
        kind = route.signal.kind
        if draw(st.booleans()):
            lines.append(f"# HELP {family} {escape_help(draw(st.text(max_size=12)))}")
            typename = {Kind.HISTOGRAM: "histogram", Kind.COUNTER: "counter"}.get(kind, "gauge")
            lines.append(f"# TYPE {family} {typename}")
        for model in models:
            for engine in draw(st.lists(st.sampled_from(["0", "1", "2"]), min_size=1, max_size=2,
                                        unique=True)):  # fmt: skip
                fixed: list[tuple[str, str]] = [("model_name", model), ("engine", engine)]
                if route.signal.label:
                    fixed.append((route.signal.label, draw(st.sampled_from(["a", "b"]))))
                if draw(st.integers(0, 4)) == 0:
                    fixed.append(("pid", draw(st.sampled_from(["1", "2"]))))
                head = ",".join(f'{k}="{escape_label(v)}"' for k, v in fixed)
                if kind is Kind.HISTOGRAM:
                    bounds = sorted(set(draw(st.lists(st.sampled_from(
                        [0.001, 0.01, 0.1, 0.5, 1.0, 2.5, 10.0, 60.0]), max_size=4))))  # fmt: skip
                    les = [spell(b, draw(st.integers(0, 3))) for b in bounds]
                    if draw(st.booleans()):
                        les.append("+Inf")
                    counts = sorted(draw(st.lists(st.integers(0, 10**6), min_size=len(les) + 1,
                                                  max_size=len(les) + 1)))  # fmt: skip
                    for le, n in zip(les, counts, strict=False):
                        lines.append(f'{family}_bucket{{{head},le="{le}"}} {n}')
                    if draw(st.booleans()):
                        lines.append(f"{family}_count{{{head}}} {counts[-1]}")
                    lines.append(f"{family}_sum{{{head}}} {draw(VALUE)}")
                else:
                    wire = draw(st.sampled_from(wires))
                    lines.append(f"{wire}{{{head}}} {draw(VALUE)}{draw(TIMESTAMP)}")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=timedelta(seconds=2),
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(vllm_page())
def test_page_reader_gives_what_prometheus_client_gives(text: str) -> None:
    scrape = PageReader().read(text, endpoint="e", t=0.0)
    want_scalars, want_hists = reference(text)
    assert scrape.scalars == pytest.approx(want_scalars, nan_ok=True)
    got = {
        k: (h.bounds, h.buckets, h.count, None if math.isnan(h.sum) else h.sum)
        for k, h in scrape.histograms.items()
    }
    assert got == want_hists
