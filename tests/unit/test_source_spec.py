"""`SourceSpec`: what to watch and how to reach it, read once from a command line.

`make_source` takes a spec, never an argparse Namespace, so `vtop whatif --url` and `vtop tune`
say what they want instead of forging the monitor's parsed flags. The spec's defaults must be
the flags' own (a command whose parser lacks a flag gets what the monitor would), each
command's flags must reach it, and a spec that cannot work is one line naming why.
"""

from __future__ import annotations

import asyncio

import pytest

from vtop.cli import tune, whatif
from vtop.cli.monitor import build_parser
from vtop.cli.sources import SourceSpec, UsageError, make_source, recorded_sources, scrape_options
from vtop.sources.base import watching
from vtop.sources.live import LiveSource
from vtop.sources.targets import Target


def test_the_defaults_are_the_monitors_flags() -> None:
    assert SourceSpec.from_args(build_parser().parse_args([])) == SourceSpec()


def test_the_monitors_flags_reach_the_spec() -> None:
    args = build_parser().parse_args(
        [
            "--url",
            "http://a:8000",
            "--url",
            "http://b:8000",
            "--interval",
            "2",
            "--header",
            "X-Team: infra",
            "--trust-redirect",
            "gw:8443",
            "--insecure",
            "--max-num-seqs",
            "64",
        ]
    )
    spec = SourceSpec.from_args(args)
    assert spec.urls == ("http://a:8000", "http://b:8000")
    assert (spec.interval, spec.header, spec.trust_redirect) == (
        2.0,
        ("X-Team: infra",),
        ("gw:8443",),
    )
    assert spec.insecure and spec.max_num_seqs == 64 and spec.max_num_batched_tokens is None
    options = scrape_options(spec)
    assert options.headers == (("X-Team", "infra"),) and not options.verify_tls
    assert options.trusted_redirects == ("gw:8443",)


def test_a_one_server_command_names_its_url_and_keeps_its_connection_flags() -> None:
    words = ["--url", "http://gpu:8000", "--header", "K: V", "--max-num-seqs", "32", "--set", "x=1"]
    args = whatif.build_parser().parse_args(words)
    spec = SourceSpec.from_args(args, urls=[args.url], interval=0.5)
    assert spec == SourceSpec(
        urls=("http://gpu:8000",), interval=0.5, header=("K: V",), max_num_seqs=32
    )
    # tune's parser has no knob flags: they keep their defaults; its --interval is its own
    args = tune.build_parser().parse_args(["--url", "http://gpu:8000", "--ca-cert", "ca.pem"])
    spec = SourceSpec.from_args(args, urls=[args.url])
    assert spec.ca_cert == "ca.pem" and spec.max_num_seqs is None
    assert spec.interval == args.interval and spec.urls == ("http://gpu:8000",)


def test_the_spec_makes_the_live_source_and_the_recordings_header() -> None:
    spec = SourceSpec(urls=("http://127.0.0.1:9",), interval=1.0, max_num_seqs=8)
    source = make_source(spec)
    try:
        assert isinstance(source, LiveSource)
        assert watching(source) == ["http://127.0.0.1:9"]
        assert recorded_sources(spec, watching(source)) == ["live http://127.0.0.1:9"]
    finally:
        asyncio.run(source.aclose())
    demo = SourceSpec(demo="healthy", seed=3)
    assert recorded_sources(demo, ["sim://healthy"]) == ["demo sim://healthy (seed 3)"]


def test_the_config_files_endpoints_are_watched_when_no_flag_names_one() -> None:
    spec = SourceSpec(config_endpoints=(Target("http://127.0.0.1:9", where="config.toml:3"),))
    source = make_source(spec)
    try:
        assert watching(source) == ["http://127.0.0.1:9"]
    finally:
        asyncio.run(source.aclose())


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (SourceSpec(), "nothing to watch: give --url URL"),
        (SourceSpec(urls=("http://a",), interval=0.0), "--interval must be positive"),
        (SourceSpec(demo="no-such"), "unknown scenario 'no-such'"),
        (SourceSpec(demo="healthy", urls=("http://a",)), "--demo cannot be combined"),
        (SourceSpec(prometheus="http://p:9090", urls=("http://a",)), "cannot be combined"),
        (SourceSpec(prometheus="http://p:9090", backfill="soon"), "--backfill:"),
        (SourceSpec(urls=("ftp://a",)), "--url:"),
    ],
)
def test_a_spec_that_cannot_work_says_why(spec: SourceSpec, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        make_source(spec)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)
