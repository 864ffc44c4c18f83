"""Command line: arguments -> live TUI | --once | --report | --record | --replay | sim | rules.

Sub-commands (`vtop sim`, `vtop rules`, `vtop trace`) are dispatched on the first word; every
other invocation is the monitor, whose mode the flags choose. Errors the user can fix are one
line on stderr and exit code 2 (usage) or 3 (UNKNOWN: nothing could be read), never a
traceback. The TUI is imported only when it is about to run, so headless modes never load
Textual.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from vtop import __version__
from vtop.monitor import Monitor
from vtop.report import cli as headless
from vtop.sources import discovery
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import HeaderError, ScrapeOptions

EXIT_UNKNOWN = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vtop",
        description="Monitor and triage vLLM servers. Sub-commands: sim, rules, trace.",
    )
    parser.add_argument("--version", action="version", version=f"vtop {__version__}")
    src = parser.add_argument_group("what to watch")
    src.add_argument(
        "--url",
        action="append",
        default=[],
        metavar="URL",
        help="vLLM server base URL (repeatable), e.g. http://localhost:8000",
    )
    src.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="poll interval (default 1 s)"
    )
    src.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'K: V'",
        help="extra request header (repeatable); VTOP_API_KEY sets a bearer token",
    )
    src.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    knobs = parser.add_argument_group("configuration the server does not expose")
    knobs.add_argument("--max-num-seqs", type=int, metavar="N")
    knobs.add_argument("--max-num-batched-tokens", type=int, metavar="N")
    out = parser.add_argument_group("output")
    out.add_argument(
        "--once",
        action="store_true",
        help="poll twice, one interval apart, print one JSON document and exit",
    )
    headless.add_arguments(parser)
    return parser


def _fail(message: str, code: int = 2) -> int:
    print(f"vtop: {message}", file=sys.stderr)
    return code


def _live_source(args: argparse.Namespace) -> LiveSource:
    options = ScrapeOptions.from_env(
        interval_s=args.interval, headers=args.header, insecure=args.insecure
    )
    flags = discovery.flag_knobs(args.max_num_seqs, args.max_num_batched_tokens)
    local = LocalHost()
    return LiveSource(
        args.url,
        options,
        flags=flags,
        gpu=local.gpu,
        host=local.host,
        process_probe=local.process_knobs,
    )


async def _once(source: LiveSource, interval: float) -> dict[str, object]:
    from vtop import summary

    monitor = Monitor(capacity=16)
    async with source:
        monitor.feed(await source.poll())
        await asyncio.sleep(interval)
        monitor.feed(await source.poll())
    return {
        "vtop": __version__,
        "t": monitor.t,
        "endpoints": [summary.endpoint(view) for view in monitor.endpoints.values()],
        "gpu": summary.gpus(monitor.gpu),
    }


def run_monitor(args: argparse.Namespace) -> int:
    if headless.wanted(args) and not args.once:
        if args.interval <= 0:
            return _fail("--interval must be positive")
        try:  # a bad --header is a usage error before anything starts
            ScrapeOptions.from_env(interval_s=args.interval, headers=args.header)
        except HeaderError as exc:
            return _fail(str(exc))
        return headless.run(args, lambda: _live_source(args), _endpoint_names(args))
    if not args.url:
        return _fail("nothing to watch: give --url URL (or --demo)")
    if args.interval <= 0:
        return _fail("--interval must be positive")
    try:
        source = _live_source(args)
    except HeaderError as exc:
        return _fail(str(exc))
    if args.once:
        doc = asyncio.run(_once(source, args.interval))
        print(json.dumps(doc, indent=2, sort_keys=False))
        endpoints = doc["endpoints"]
        assert isinstance(endpoints, list)
        return 0 if any(e["status"] == "ok" for e in endpoints) else EXIT_UNKNOWN
    return _fail("the live TUI is not built yet; use --once")


def _endpoint_names(args: argparse.Namespace) -> list[str]:
    from vtop.sources.vllm import base_url, redact_url

    return [redact_url(base_url(u)) for u in args.url]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["trace"]:
        from vtop.trace.info import main as trace_main

        return trace_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return run_monitor(args)
    except KeyboardInterrupt:
        return 130
