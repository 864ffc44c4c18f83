"""`vtop sim`: serve a simulated vLLM (or several) on loopback, or list the scenarios.

    vtop sim --scenario memory-ceiling --port 8000 --speed 2 --emulate-version 0.10
    vtop sim --list

Each instance is a `Twin` behind a `SimServer` on consecutive ports (port 0: any free port), a
different seed per instance so several endpoints do not move in lockstep. By default the twin
first runs the scenario's warm-up in virtual time, so the symptom is on the page at the first
scrape. The CLI owner wires `register()` into `vtop/cli.py`; `run()` returns the exit code.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from typing import Any, TextIO

from vtop.sim.dialects import DEFAULT_DIALECT, normalise
from vtop.sim.scenarios import SCENARIOS
from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `sim` sub-command to an `argparse` sub-parsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "sim",
        help="serve a simulated vLLM server (a scheduler twin) on loopback",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--scenario", default="healthy", help="scenario name (see --list)")
    p.add_argument("--list", action="store_true", help="describe the scenarios and exit")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8000, help="first port (0: any free port)")
    p.add_argument("--speed", type=float, default=1.0, help="virtual seconds per wall second")
    p.add_argument(
        "--emulate-version",
        default=DEFAULT_DIALECT,
        help="vLLM version whose /metrics dialect to speak: 0.6, 0.10 or 0.32 (default)",
    )
    p.add_argument("--instances", type=int, default=1, help="how many servers to start")
    p.add_argument("--seed", type=int, default=0, help="random seed of the first instance")
    p.add_argument(
        "--no-warmup", action="store_true", help="start at virtual second 0, not after warm-up"
    )
    p.add_argument("--duration", type=float, default=None, help="stop after this many wall seconds")
    p.set_defaults(func=run)
    return p


def describe(out: TextIO) -> None:
    """The `--list` text: one block per scenario."""
    for sc in SCENARIOS.values():
        rule = sc.rule or "(none: baseline)"
        out.write(f"{sc.name}  -> rule {rule}\n  {sc.title}\n")
        out.write(textwrap.fill(sc.cause, width=96, initial_indent="  ", subsequent_indent="  "))
        out.write(f"\n  symptom: {sc.symptom}\n\n")


def _error(msg: str) -> int:
    print(f"vtop sim: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run `vtop sim` with parsed `args`; returns the process exit code."""
    if args.list:
        describe(sys.stdout)
        return 0
    if args.scenario not in SCENARIOS:
        return _error(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}")
    try:
        dialect = normalise(args.emulate_version)
    except ValueError as exc:
        return _error(str(exc))
    if not args.speed > 0:
        return _error(f"--speed must be positive, got {args.speed}")
    if args.instances < 1:
        return _error(f"--instances must be at least 1, got {args.instances}")
    servers: list[SimServer] = []
    try:
        for i in range(args.instances):
            twin = Twin(args.scenario, seed=args.seed + i, emulate_version=dialect)
            if not args.no_warmup:
                twin.warm_up()
            port = args.port + i if args.port else 0
            try:
                servers.append(serve(twin, args.host, port, args.speed))
            except OSError as exc:
                return _error(f"cannot listen on {args.host}:{port}: {exc.strerror or exc}")
            sc = twin.scenario
            print(
                f"vtop sim: {sc.name} (rule {sc.rule or 'none'}) on {servers[-1].url} "
                f"as vLLM {twin.endpoint_info().version}, {args.speed:g}x real time",
                flush=True,
            )
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        pass
    finally:
        for s in servers:
            s.close()
    return 0
