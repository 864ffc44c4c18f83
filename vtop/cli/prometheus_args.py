"""`--prometheus URL`, `--match SELECTOR` and `--backfill DURATION`: the flags, and the source.

`PrometheusSource` takes plain values (a URL, matchers, seconds); turning the flags' words into
them (`source`, from `vtop.cli.sources.SourceSpec`), and saying in one line which flag is wrong,
is the command line's job and lives here, so the sources never import argparse or the command
line. A bad value is a `ValueError` whose message is the whole explanation (`--backfill: …`),
which the caller turns into a usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from vtop import durations
from vtop.cli import ranges
from vtop.model import Knob
from vtop.sources import promql
from vtop.sources.prometheus import PrometheusSource
from vtop.sources.urls import check_url
from vtop.sources.vllm import ScrapeOptions


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """`--prometheus URL`, `--match SELECTOR` and `--backfill DURATION`."""
    group.add_argument(
        "--prometheus",
        metavar="URL",
        help="read every vLLM instance from this Prometheus (its HTTP API) instead of "
        "scraping them; --header and VTOP_API_KEY apply to it",
    )
    group.add_argument(
        "--match",
        metavar="SELECTOR",
        default="",
        help="with --prometheus: label matchers that choose the instances, e.g. "
        '\'{job="vllm",env="prod"}\'',
    )
    group.add_argument(
        "--backfill",
        metavar="DURATION",
        default="1h",
        type=ranges.BACKFILL,
        help=ranges.ranged(
            "with --prometheus: history to read on start (default 1h; 0 for none)", ranges.BACKFILL
        ),
    )


def source(
    url: str,
    match: str,
    backfill: str,
    interval_s: float,
    options: ScrapeOptions,
    *,
    flags: Mapping[str, Knob] | None = None,
    instance_flags: Mapping[str, Mapping[str, Knob]] | None = None,
) -> PrometheusSource:
    """The source `--prometheus URL --match SELECTOR --backfill DURATION` asks for;
    ValueError (one line, naming the flag) for a bad URL, --match or --backfill."""
    problem = check_url(url)
    if problem:
        raise ValueError(f"--prometheus: {problem}")
    try:
        matchers = promql.parse_match(match)
    except promql.MatchError as exc:
        raise ValueError(str(exc)) from None
    try:
        backfill_s = durations.parse(backfill)
    except ValueError as exc:
        raise ValueError(f"--backfill: {exc}") from None
    return PrometheusSource(
        url,
        options,
        match=matchers,
        backfill_s=backfill_s,
        interval_s=interval_s,
        flags=flags,
        instance_flags=instance_flags,
    )
