"""The source the monitor's flags ask for: `--prometheus`, `--demo`, else the endpoints.

What to watch and how to reach it is read off the parsed command line once, into a
`SourceSpec` (`SourceSpec.from_args`); `make_source` and `scrape_options` take that spec, never
the argparse Namespace. A command that polls one server without the monitor's flags (`vtop
whatif --url`, `vtop tune`) states the URL and interval it wants (`from_args(args, urls=...,
interval=...)`) instead of forging a parsed command line, and every flag its parser lacks
keeps its default. Each kind of source is built by the sources package from plain values;
this module checks what cannot work together, and says so as a `UsageError` whose message is
the whole explanation (the caller prints it and exits with the usage code). What a source
watches, for a report or a recording's header, the source says itself
(`vtop.sources.base.watching`): nothing here asks which class it is.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vtop.cli import prometheus_args, targets_args
from vtop.sources import discovery, targets
from vtop.sources.base import FrameSource
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.netconfig import NetConfigError
from vtop.sources.sim import DEMO_RUNNING_S, SimSource
from vtop.sources.targets import Target
from vtop.sources.vllm import HeaderError, ScrapeOptions


class UsageError(Exception):
    """A command line that cannot work; the message is the whole explanation."""


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """What to watch and how to reach it, as the command line said: the one input of
    `make_source`. The defaults are the flags' own."""

    urls: tuple[str, ...] = ()
    """`--url`, in the order given."""
    interval: float = 1.0
    """`--interval`: seconds between polls."""
    targets: tuple[str, ...] = ()
    """`--targets` files."""
    discover: bool = False
    config_endpoints: tuple[Target, ...] = ()
    """The config file's `[[endpoint]]`s, watched when no flag names a server."""
    prometheus: str | None = None
    match: str = ""
    """`--match`: with `--prometheus`, the matchers that choose the instances."""
    backfill: str = "1h"
    """`--backfill`: with `--prometheus`, the history read on start."""
    demo: str | None = None
    """`--demo`: the simulated scenario to watch."""
    speed: float = 1.0
    seed: int = 0
    header: tuple[str, ...] = ()
    """`--header` values (`K: V`); VTOP_API_KEY is read where the requests are made."""
    insecure: bool = False
    trust_redirect: tuple[str, ...] = ()
    ca_cert: str | None = None
    max_num_seqs: int | None = None
    """`--max-num-seqs`: the knob no metric exposes, as the user gave it."""
    max_num_batched_tokens: int | None = None

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace,
        *,
        urls: Sequence[str] | None = None,
        interval: float | None = None,
    ) -> SourceSpec:
        """The spec a parsed command line asks for. Each field is read from the flag of its
        name where the command's parser has it (the monitor has them all; `vtop whatif` and
        `vtop tune` the connection flags, and whatif the knob flags too), else it keeps its
        default; `urls` and `interval` are given by a command whose `--url` names one server
        or whose interval has a default of its own."""
        default = cls()

        def flag(name: str, fallback: Any) -> Any:
            value = getattr(args, name, None)
            return fallback if value is None else value

        return cls(
            urls=_urls(flag("url", default.urls) if urls is None else urls),
            interval=flag("interval", default.interval) if interval is None else interval,
            targets=tuple(flag("targets", default.targets)),
            discover=flag("discover", default.discover),
            config_endpoints=tuple(flag("config_endpoints", default.config_endpoints)),
            prometheus=flag("prometheus", default.prometheus),
            match=flag("match", default.match),
            backfill=flag("backfill", default.backfill),
            demo=flag("demo", default.demo),
            speed=flag("speed", default.speed),
            seed=flag("seed", default.seed),
            header=tuple(flag("header", default.header)),
            insecure=flag("insecure", default.insecure),
            trust_redirect=tuple(flag("trust_redirect", default.trust_redirect)),
            ca_cert=flag("ca_cert", default.ca_cert),
            max_num_seqs=flag("max_num_seqs", default.max_num_seqs),
            max_num_batched_tokens=flag("max_num_batched_tokens", default.max_num_batched_tokens),
        )


def _urls(given: str | Sequence[str]) -> tuple[str, ...]:
    """`--url` as a tuple: the monitor's repeats, a one-server command's is one string."""
    return (given,) if isinstance(given, str) else tuple(given)


def scrape_options(spec: SourceSpec) -> ScrapeOptions:
    """How every endpoint is reached (the token, --header, TLS, proxies), from the spec."""
    return ScrapeOptions.from_env(
        interval_s=spec.interval,
        headers=list(spec.header),
        insecure=spec.insecure,
        ca_cert=spec.ca_cert,
        trust_redirect=list(spec.trust_redirect),
    )


def _live_source(spec: SourceSpec, fleet: list[targets.Target]) -> LiveSource:
    options = scrape_options(spec)
    flags = discovery.flag_knobs(spec.max_num_seqs, spec.max_num_batched_tokens)
    local = LocalHost()
    return LiveSource(
        [t.url for t in fleet],
        options,
        flags=flags,
        endpoint_flags={t.url: t.knobs() for t in fleet},
        gpu=local.gpu,
        host=local.host,
        process_probe=local.process_knobs,
    )


def _prometheus_source(spec: SourceSpec) -> FrameSource:
    """--prometheus URL: every instance it scrapes (knobs per instance from --targets labels)."""
    if spec.urls or spec.discover or spec.demo:
        raise UsageError(
            "--prometheus reads its instances from Prometheus: it cannot be "
            "combined with --url, --discover or --demo"
        )
    assert spec.prometheus is not None
    try:
        fleet = [t for path in spec.targets for t in targets.load_targets(path)]
        options = scrape_options(spec)
        flags = discovery.flag_knobs(spec.max_num_seqs, spec.max_num_batched_tokens)
        per_instance = {t.instance: t.knobs() for t in fleet}
        return prometheus_args.source(
            spec.prometheus,
            spec.match,
            spec.backfill,
            spec.interval,
            options,
            flags=flags,
            instance_flags=per_instance,
        )
    except (HeaderError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _demo_source(spec: SourceSpec) -> SimSource:
    from vtop.sim.scenarios import SCENARIOS

    assert spec.demo is not None
    if spec.demo not in SCENARIOS:
        raise UsageError(f"unknown scenario {spec.demo!r}; `vtop sim --list` names them")
    if not spec.speed > 0:
        raise UsageError("--speed must be positive")
    return SimSource.scenario(
        spec.demo,
        seed=spec.seed,
        interval_s=spec.interval,
        speed=spec.speed,
        running_s=DEMO_RUNNING_S,
    )


def make_source(spec: SourceSpec) -> FrameSource:
    """The source the spec asks for: --prometheus, --demo, else --url / --targets /
    --discover (the config file's endpoints when none of them names a server)."""
    if spec.interval <= 0:
        raise UsageError("--interval must be positive")
    if spec.prometheus:
        return _prometheus_source(spec)
    if spec.demo and (spec.urls or spec.targets or spec.discover):
        raise UsageError("--demo cannot be combined with --url, --targets or --discover")
    if spec.demo:
        return _demo_source(spec)
    try:
        fleet = targets_args.endpoints(
            spec.urls, spec.targets, discover=spec.discover, fallback=spec.config_endpoints
        )
    except targets.TargetsError as exc:
        raise UsageError(str(exc)) from None
    if not fleet:
        if spec.discover:
            raise UsageError("nothing to watch: --discover found no vLLM server on this host")
        raise UsageError(
            "nothing to watch: give --url URL, --targets FILE, --discover, "
            "--prometheus URL (or --demo)"
        )
    try:
        return _live_source(spec, fleet)
    except (HeaderError, NetConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def recorded_sources(spec: SourceSpec, watched: list[str]) -> list[str]:
    """What a recording's header says it recorded: `live URL`, `demo SCENARIO (seed N)`."""
    kind, seed = ("demo", f" (seed {spec.seed})") if spec.demo else ("live", "")
    return [f"{kind} {name}{seed}" for name in watched]
