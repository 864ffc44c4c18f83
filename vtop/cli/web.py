"""`vtop --web [HOST:]PORT`: the dashboard served to browsers, the command line's side of it.

This module reads the flag (`address`: a bare port is loopback's), refuses what a browser
session cannot hold (a report or `--once` prints to this terminal, not a screen; a recording
would be written by every session's app into one file), checks the rest of the command line
once here, so that a typo is one line on this terminal and not a blank page in every browser,
and builds the command each session runs: these very words without `--web` (`child_words`),
so the app in the browser is the one this terminal would show, and its process title carries
no token (the token lives only in this process, and in the one line that prints the URL).

The server is `vtop.ui.web`, imported only once the flag is given: aiohttp and jinja2 load
for `--web` alone. A port that cannot be listened on is one line and the usage exit code, as
`vtop sim --port` does it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN, Exits
from vtop.cli.output import fail
from vtop.cli.sources import UsageError, make_source

FLAG = "--web"
SHORTEST = "--we"
"""The shortest abbreviation of `--web` argparse accepts (`--w` is also `--wait-for`'s);
tests/unit/test_web_cli.py checks it against the parser."""

DEFAULT_HOST = "127.0.0.1"
WILDCARDS = ("0.0.0.0", "::", "")
"""Hosts that mean every address of this machine: no browser opens them as they are."""


@dataclass(frozen=True, slots=True)
class Address:
    """Where `--web` listens."""

    host: str
    port: int

    def shown(self, port: int | None = None) -> str:
        """`127.0.0.1:6006`, `[::1]:6006` (with `port` for the one bound in place of 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port if port is None else port}"


def address(text: str) -> Address:
    """`PORT` (on 127.0.0.1), `HOST:PORT` or `[IPv6]:PORT`, as argparse's type; port 0 lets
    the system choose a free one (the printed URL says which)."""
    host, colon, port_text = text.rpartition(":")
    if not colon:
        host = DEFAULT_HOST
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise argparse.ArgumentTypeError(f"{text!r}: write an IPv6 address in brackets, [::1]:6006")
    elif not host:
        raise argparse.ArgumentTypeError(f"{text!r}: give PORT or HOST:PORT, e.g. 0.0.0.0:6006")
    if not port_text.isdigit() or int(port_text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not [HOST:]PORT with a port of 0 to 65535")
    return Address(host, int(port_text))


def child_words(words: Sequence[str]) -> list[str]:
    """The command line without `--web` and its value, as argparse reads them (`--web 6006`,
    `--web=6006`, an abbreviation); words after `--` are left as they are."""
    kept: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word == "--":
            kept.extend(words[i:])
            break
        name, equals, _ = word.partition("=")
        if len(name) >= len(SHORTEST) and FLAG.startswith(name):
            skip = not equals
            continue
        kept.append(word)
    return kept


def conflict(args: argparse.Namespace) -> str | None:
    """What `--web` does not go with, as one line."""
    if args.report or args.once or args.record or args.headless:
        return (
            "--web serves the dashboard (or a replay) to browsers; it does not go with "
            "--report, --once, --record or --headless"
        )
    return None


def run(args: argparse.Namespace, words: Sequence[str], exits: Exits) -> int:
    """Check the command line, then serve its app to browsers until Ctrl-C (exit 0)."""
    problem = conflict(args)
    if problem is not None:
        return fail(problem, exits.usage)
    code = _check(args, exits)
    if code is not None:
        return code
    from vtop.ui import web as served

    where: Address = args.web
    token = served.new_token()
    command = shlex.join([sys.executable, "-m", "vtop", *child_words(words)])

    def ready(port: int) -> None:
        print(f"vtop: {_open_line(where, port, token)}", flush=True)

    try:
        served.serve(command, where.host, where.port, token, ready)
    except OSError as exc:  # asyncio words it "error while attempting to bind on …": the errno's
        # (a host that does not resolve is a gaierror, its errno negative: its own words)
        reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror
        reason = reason or str(exc)
        return fail(f"cannot listen on {where.shown()}: {reason}", exits.usage)
    return EXIT_OK


def _open_line(where: Address, port: int, token: str) -> str:
    """The one line that gives the URL (the only place the token is ever written)."""
    if where.host in WILDCARDS:
        url = f"http://{DEFAULT_HOST}:{port}/{token}/"
        return (
            f"dashboard at {url} (listening on every address, port {port}: from elsewhere, "
            f"this host's address or its HTTPS proxy, with the path /{token}/; Ctrl-C stops)"
        )
    return f"dashboard at http://{where.shown(port)}/{token}/ (Ctrl-C stops)"


def _check(args: argparse.Namespace, exits: Exits) -> int | None:
    """The source (or the trace) each session will open, opened once here: its error is one
    line now, with the code the terminal's dashboard would give it."""
    if args.replay:
        from vtop import durations
        from vtop.cli import shipped_traces as shipped
        from vtop.trace.reader import TraceError, TraceReader

        if args.url or args.demo:
            return fail("give one of --url, --demo or --replay", exits.usage)
        try:
            with TraceReader(shipped.resolve(args.replay)) as reader:
                durations.window(args.from_, args.to, reader.start, reader.end)
        except TraceError as exc:
            return fail(str(exc), EXIT_UNKNOWN)
        except ValueError as exc:  # --from/--to outside the trace, or not a time
            return fail(str(exc), exits.usage)
        return None
    if args.train or args.from_ or args.to:
        return fail("--train, --from and --to go with --replay FILE", exits.usage)
    try:
        source = make_source(args)
    except UsageError as exc:
        return fail(str(exc), exits.usage)
    asyncio.run(source.aclose())
    return None
