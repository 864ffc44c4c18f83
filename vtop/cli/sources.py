"""The source the monitor's flags ask for: `--prometheus`, `--demo`, else the endpoints.

Each kind of source is built by the sources package from plain values; this module reads the
parsed flags, checks what cannot work together, and says so as a `UsageError` whose message is
the whole explanation (the caller prints it and exits with the usage code). What a source
watches, for a report or a recording's header, the source says itself
(`vtop.sources.base.watching`): nothing here asks which class it is.
"""

from __future__ import annotations

import argparse

from vtop.cli import prometheus_args, targets_args
from vtop.sources import discovery, targets
from vtop.sources.base import FrameSource
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.netconfig import NetConfigError
from vtop.sources.sim import DEMO_RUNNING_S, SimSource
from vtop.sources.vllm import HeaderError, ScrapeOptions


class UsageError(Exception):
    """A command line that cannot work; the message is the whole explanation."""


def scrape_options(args: argparse.Namespace) -> ScrapeOptions:
    """How every endpoint is reached (the token, --header, TLS, proxies), from the flags."""
    return ScrapeOptions.from_env(
        interval_s=args.interval,
        headers=args.header,
        insecure=args.insecure,
        ca_cert=args.ca_cert,
        trust_redirect=getattr(args, "trust_redirect", []),
    )


def _live_source(args: argparse.Namespace, fleet: list[targets.Target]) -> LiveSource:
    options = scrape_options(args)
    flags = discovery.flag_knobs(args.max_num_seqs, args.max_num_batched_tokens)
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


def _prometheus_source(args: argparse.Namespace) -> FrameSource:
    """--prometheus URL: every instance it scrapes (knobs per instance from --targets labels)."""
    if args.url or args.discover or args.demo:
        raise UsageError(
            "--prometheus reads its instances from Prometheus: it cannot be "
            "combined with --url, --discover or --demo"
        )
    try:
        fleet = [t for path in args.targets for t in targets.load_targets(path)]
        options = scrape_options(args)
        flags = discovery.flag_knobs(args.max_num_seqs, args.max_num_batched_tokens)
        per_instance = {t.instance: t.knobs() for t in fleet}
        return prometheus_args.from_args(args, options, flags=flags, instance_flags=per_instance)
    except (HeaderError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _demo_source(args: argparse.Namespace) -> SimSource:
    from vtop.sim.scenarios import SCENARIOS

    if args.demo not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.demo!r}; `vtop sim --list` names them")
    if not args.speed > 0:
        raise UsageError("--speed must be positive")
    return SimSource.scenario(
        args.demo,
        seed=args.seed,
        interval_s=args.interval,
        speed=args.speed,
        running_s=DEMO_RUNNING_S,
    )


def make_source(args: argparse.Namespace) -> FrameSource:
    """The source the flags ask for: --prometheus, --demo, else --url / --targets / --discover."""
    if args.interval <= 0:
        raise UsageError("--interval must be positive")
    if args.prometheus:
        return _prometheus_source(args)
    if args.demo and (args.url or args.targets or args.discover):
        raise UsageError("--demo cannot be combined with --url, --targets or --discover")
    if args.demo:
        return _demo_source(args)
    try:
        fleet = targets_args.from_args(args)
    except targets.TargetsError as exc:
        raise UsageError(str(exc)) from None
    if not fleet:
        if args.discover:
            raise UsageError("nothing to watch: --discover found no vLLM server on this host")
        raise UsageError(
            "nothing to watch: give --url URL, --targets FILE, --discover, "
            "--prometheus URL (or --demo)"
        )
    try:
        return _live_source(args, fleet)
    except (HeaderError, NetConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def recorded_sources(args: argparse.Namespace, watched: list[str]) -> list[str]:
    """What a recording's header says it recorded: `live URL`, `demo SCENARIO (seed N)`."""
    kind, seed = ("demo", f" (seed {args.seed})") if args.demo else ("live", "")
    return [f"{kind} {name}{seed}" for name in watched]
