"""`--prometheus URL`, `--match SELECTOR` and `--backfill DURATION`: the flags, and the source.

`PrometheusSource` takes plain values (a URL, matchers, seconds); reading them off the parsed
command line, and saying in one line which flag is wrong, is the command line's job and lives
here, so the sources never import argparse or the command line. A bad value is a `ValueError`
whose message is the whole explanation (`--backfill: …`), which the caller turns into a usage
error.
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


def from_args(
    args: argparse.Namespace,
    options: ScrapeOptions,
    *,
    flags: Mapping[str, Knob] | None = None,
    instance_flags: Mapping[str, Mapping[str, Knob]] | None = None,
) -> PrometheusSource:
    """The source `--prometheus` asks for; ValueError (one line) for a bad --match/--backfill."""
    problem = check_url(args.prometheus)
    if problem:
        raise ValueError(f"--prometheus: {problem}")
    try:
        match = promql.parse_match(args.match)
    except promql.MatchError as exc:
        raise ValueError(str(exc)) from None
    try:
        backfill = durations.parse(args.backfill)
    except ValueError as exc:
        raise ValueError(f"--backfill: {exc}") from None
    return PrometheusSource(
        args.prometheus,
        options,
        match=match,
        backfill_s=backfill,
        interval_s=args.interval,
        flags=flags,
        instance_flags=instance_flags,
    )
