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
from pathlib import Path

from vtop import __version__
from vtop.monitor import Monitor
from vtop.sources import discovery
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import HeaderError, ScrapeOptions
from vtop.triage.engine import Engine

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
    triage = parser.add_argument_group("triage")
    triage.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="DIR",
        help="extra rule directory (repeatable); its rules replace shipped ones by id",
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--once",
        action="store_true",
        help="poll twice, one interval apart, print one JSON document and exit",
    )
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


def _engine(args: argparse.Namespace) -> Engine:
    """Shipped rules, the user's rule directory, then --rules; bad rules are reported, skipped."""
    engine = Engine.from_catalog([Path(d) for d in args.rules])
    for err in engine.errors:
        print(f"vtop: rule skipped: {err}", file=sys.stderr)
    return engine


async def _once(source: LiveSource, interval: float, engine: Engine | None = None
                ) -> dict[str, object]:  # fmt: skip
    from vtop import summary

    monitor = Monitor(capacity=16, engine=engine)
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
    if not args.url:
        return _fail("nothing to watch: give --url URL (or --demo)")
    if args.interval <= 0:
        return _fail("--interval must be positive")
    try:
        source = _live_source(args)
    except HeaderError as exc:
        return _fail(str(exc))
    if args.once:
        doc = asyncio.run(_once(source, args.interval, _engine(args)))
        print(json.dumps(doc, indent=2, sort_keys=False))
        endpoints = doc["endpoints"]
        assert isinstance(endpoints, list)
        return 0 if any(e["status"] == "ok" for e in endpoints) else EXIT_UNKNOWN
    return _fail("the live TUI is not built yet; use --once")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["rules"]:
        from vtop.triage.cli import main as rules_main

        return rules_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return run_monitor(args)
    except KeyboardInterrupt:
        return 130
