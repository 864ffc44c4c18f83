"""The exposition parser: the format's corners, and any input ends in a value or ParseError."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtop.model import Scrape, SeriesKey
from vtop.signals.extract import MAX_LABEL, PageReader, clean_label
from vtop.signals.parser import ParseError, iter_samples, parse_head


def read(text: str) -> Scrape:
    return PageReader().read(text, endpoint="e", t=0.0)


def test_escapes_in_label_values() -> None:
    name, labels = parse_head(r'm{a="x\"y",b="back\\slash",c="line\nbreak",d="q}{,"}')
    assert name == "m"
    assert dict(labels) == {"a": 'x"y', "b": "back\\slash", "c": "line\nbreak", "d": "q}{,"}


def test_timestamps_whitespace_and_crlf() -> None:
    page = 'vllm:num_requests_running{model_name="m"}  4 1700000000000\r\n'
    page += "vllm:num_requests_waiting\t2\n"
    sc = read(page)
    assert sc.scalars[SeriesKey("running", "m", "", "")] == 4
    assert sc.scalars[SeriesKey("waiting", "", "", "")] == 2


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("vllm:num_requests_running{engine=0} 1", "no quoted value"),
        ('vllm:num_requests_running{engine="0" 1', "not closed"),
        ('vllm:num_requests_running{engine="0"}', "expected a value"),
        ("vllm:num_requests_running 1 2 3", "expected a value"),
        ('vllm:num_requests_running{engine="0"} one', "invalid sample value"),
        ("vllm:num_requests_running 1_000", "invalid sample value"),
        ("9bad 1", "invalid metric name"),
    ],
)
def test_malformed_lines_name_the_line(line: str, what: str) -> None:
    with pytest.raises(ParseError, match=what) as err:
        read("# HELP x y\n" + line + "\n")
    assert err.value.lineno == 2
    assert str(err.value).startswith("line 2: ")


def test_help_lines_without_samples_and_blank_lines() -> None:
    page = "# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n\n   \n"
    sc = read(page)
    assert sc.scalars == {}
    assert not sc.has_vllm_series


def test_nan_and_inf_are_not_measurements() -> None:
    sc = read("vllm:num_requests_running NaN\nvllm:num_requests_waiting +Inf\n"
              "vllm:kv_cache_usage_perc -0.3\n")  # fmt: skip
    assert SeriesKey("running") not in sc.scalars
    assert SeriesKey("waiting") not in sc.scalars
    assert sc.scalars[SeriesKey("kv_usage")] == -0.3  # suspect, but kept for the UI to flag


def test_hostile_label_values_are_made_inert() -> None:
    evil = "\\x1b[31m" + "[bold]" + "A" * 10_000
    sc = read(f'vllm:num_requests_running{{model_name="\x1b[2J{evil}"}} 1\n')
    (k,) = sc.scalars
    assert "\x1b" not in k.model
    assert len(k.model) == MAX_LABEL
    assert clean_label("ok\u0085\x07x") == "okx"


def test_duplicate_lines_count_once_and_extra_labels_merge() -> None:
    page = (
        'vllm:generation_tokens_total{model_name="m"} 5\n'
        'vllm:generation_tokens_total{model_name="m"} 7\n'  # verbatim duplicate: last wins
        'vllm:num_requests_running{model_name="m",pid="1"} 3\n'
        'vllm:num_requests_running{model_name="m",pid="2"} 4\n'  # multiprocess: max of gauges
        'vllm:prompt_tokens_total{model_name="m",pid="1"} 10\n'
        'vllm:prompt_tokens_total{model_name="m",pid="2"} 20\n'  # counters add up
    )
    sc = read(page)
    assert sc.scalars[SeriesKey("generation_tokens", "m")] == 7
    assert sc.scalars[SeriesKey("running", "m")] == 4
    assert sc.scalars[SeriesKey("prompt_tokens", "m")] == 30


def test_newest_alias_wins_when_both_are_present() -> None:
    page = "vllm:gpu_cache_usage_perc 0.1\nvllm:kv_cache_usage_perc 0.7\n"
    assert read(page).scalars[SeriesKey("kv_usage")] == 0.7
    assert read("vllm:gpu_cache_usage_perc 0.1\n").scalars[SeriesKey("kv_usage")] == 0.1


def test_histogram_without_inf_bucket_uses_count() -> None:
    page = (
        'vllm:time_to_first_token_seconds_bucket{le="0.1"} 2\n'
        'vllm:time_to_first_token_seconds_bucket{le="1.0"} 5\n'
        "vllm:time_to_first_token_seconds_count 6\n"
        "vllm:time_to_first_token_seconds_sum 2.5\n"
    )
    h = read(page).histograms[SeriesKey("ttft")]
    assert h.bounds == (0.1, 1.0) and h.buckets == (2, 5) and h.count == 6 and h.sum == 2.5


def test_histogram_with_neither_inf_nor_count_is_dropped() -> None:
    page = 'vllm:time_to_first_token_seconds_bucket{le="0.1"} 2\n'
    assert read(page).histograms == {}


def test_bucket_without_le_is_an_error() -> None:
    with pytest.raises(ParseError, match="no 'le' label"):
        read("vllm:time_to_first_token_seconds_bucket 2\n")


def test_reader_cache_does_not_change_results() -> None:
    reader = PageReader()
    page = 'vllm:num_requests_running{model_name="m",engine="0"} %d\n'
    for i in range(3):
        sc = reader.read(page % i, endpoint="e", t=float(i))
        assert sc.scalars[SeriesKey("running", "m", "0")] == i


def test_iter_samples_matches_the_page() -> None:
    samples = list(iter_samples('a{b="c"} 1\n# c\nd 2.5 123\n'))
    assert samples == [("a", (("b", "c"),), 1.0), ("d", (), 2.5)]


LINE = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda n, k, v, x: f'{n}{{{k}="{v}"}} {x}',
        st.sampled_from(["vllm:num_requests_running", "vllm:iteration_tokens_total_bucket",
                         "vllm:time_to_first_token_seconds_count", "x", "1x", ""]),
        st.sampled_from(["le", "engine", "model_name", "pid", "", "a b"]),
        st.text(max_size=20),
        st.one_of(st.floats().map(repr), st.text(max_size=8)),
    ),
)  # fmt: skip


@settings(max_examples=400, deadline=timedelta(milliseconds=500))
@given(st.lists(LINE, max_size=40))
def test_any_input_returns_or_raises_parse_error(lines: list[str]) -> None:
    """Any page ends in finite values or one ParseError naming a line of it (value for value
    agreement with prometheus-client on well-formed pages: test_parser_differential.py)."""
    text = "\n".join(lines)
    try:
        sc = read(text)
    except ParseError as err:
        assert err.lineno is not None and 1 <= err.lineno <= len(text.split("\n"))
        assert str(err).startswith(f"line {err.lineno}: ")
        return
    for v in sc.scalars.values():
        assert math.isfinite(v)


@settings(max_examples=200, deadline=timedelta(milliseconds=500))
@given(st.binary(max_size=4000))
def test_random_bytes(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    try:
        sc = read(text)
    except ParseError as err:
        assert err.lineno is not None and 1 <= err.lineno <= len(text.split("\n"))
        return
    assert all(math.isfinite(v) for v in sc.scalars.values())
