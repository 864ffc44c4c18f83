"""`vtop sim`: serve a simulated vLLM (or several) on loopback, or list the scenarios.

    vtop sim --scenario memory-ceiling --port 8000 --speed 2 --emulate-version 0.10
    vtop sim --scenario budget-too-small --max-num-seqs 64
    vtop sim --list

Each instance is a `Twin` behind a `SimServer` on consecutive ports (port 0: any free port), a
different seed per instance so several endpoints do not move in lockstep. By default the twin
first runs the scenario's warm-up in virtual time, so the symptom is on the page at the first
scrape. Every flag has a default (its help says which): bare `vtop sim` serves `healthy` on
:8000, and each server says so in one line as it starts. The dispatcher (`vtop.cli.dispatch`)
wires `register()` in; `run()` returns the exit code. The simulation is `vtop.sim`'s (the twin,
its scenarios and dialects, the server); this module only turns arguments into servers and
says what it started.

The scheduler's flags (`--max-num-seqs`, `--kv-cache-dtype`, … : every knob the twin can set,
spelled as `vllm serve` takes them) replace the scenario's own, so a recommendation can be tried
on the simulated server by restarting it with the flag, as on a real one (`vtop tune` does).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from vtop import knobs
from vtop.cli import ranges
from vtop.cli.exits import EXIT_OK, EXIT_USAGE
from vtop.cli.usage import OneLineParser
from vtop.knobs import KnobValue
from vtop.sim.dialects import DEFAULT_DIALECT, normalise
from vtop.sim.scenarios import SCENARIOS, Scenario
from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin

DEFAULT_SCENARIO = "healthy"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
EPILOG = f"""\
Without flags: scenario {DEFAULT_SCENARIO!r} on http://{DEFAULT_HOST}:{DEFAULT_PORT}/metrics,
at real time, until Ctrl-C (one line on start says so). Watch it with
  vtop --url http://{DEFAULT_HOST}:{DEFAULT_PORT}
or watch a simulation without a server: vtop --demo SCENARIO."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `sim` sub-command to an `argparse` sub-parsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "sim",
        help="serve a simulated vLLM server (a scheduler twin) on loopback",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--scenario",
        default=DEFAULT_SCENARIO,
        metavar="NAME",
        help=f"what the server suffers from (default: {DEFAULT_SCENARIO}; --list describes them)",
    )
    p.add_argument("--list", action="store_true", help="describe the scenarios and exit")
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        metavar="ADDRESS",
        help=f"address to bind (default: {DEFAULT_HOST}, this host only)",
    )
    p.add_argument(
        "--port",
        type=ranges.PORT,
        default=DEFAULT_PORT,
        metavar="PORT",
        help=ranges.ranged(
            "port of the first server, the next ones on the following "
            f"ports (default: {DEFAULT_PORT}; 0: any free port)",
            ranges.PORT,
        ),
    )
    p.add_argument(
        "--speed",
        type=ranges.SIM_SPEED,
        default=1.0,
        metavar="X",
        help=ranges.ranged(
            "virtual seconds per wall second (default: 1, real time)", ranges.SIM_SPEED
        ),
    )
    p.add_argument(
        "--emulate-version",
        default=DEFAULT_DIALECT,
        metavar="VERSION",
        help=f"vLLM version whose /metrics dialect to speak: 0.6, 0.10 or 0.32 "
        f"(default: {DEFAULT_DIALECT})",
    )
    p.add_argument(
        "--instances",
        type=ranges.INSTANCES,
        default=1,
        metavar="N",
        help=ranges.ranged("how many servers to start (default: 1)", ranges.INSTANCES),
    )
    p.add_argument(
        "--seed",
        type=ranges.SEED,
        default=0,
        metavar="N",
        help=ranges.ranged(
            "random seed of the first instance, the next ones +1 each (default: 0)", ranges.SEED
        ),
    )
    p.add_argument(
        "--no-warmup",
        action="store_true",
        help="start at virtual second 0 (default: after the scenario's warm-up, its symptom "
        "already on the page)",
    )
    p.add_argument(
        "--duration",
        type=ranges.SIM_SECONDS,
        default=None,
        metavar="SECONDS",
        help=ranges.ranged(
            "stop after this many wall seconds (default: until Ctrl-C)", ranges.SIM_SECONDS
        ),
    )
    add_serve_flags(
        p.add_argument_group(
            "the server's flags, as vllm serve takes them (default: the scenario's)"
        )
    )
    p.set_defaults(func=run)
    return p


def add_serve_flags(group: argparse._ArgumentGroup) -> None:
    """One flag per knob the twin can set (`vtop.knobs`), parsed and bounded as the knob is;
    a boolean takes its `--no-` form too. Each lands in `args.serve_<name>`."""
    for name in knobs.twin_knobs():
        spec = knobs.KNOBS[name]
        dest = f"serve_{name}"
        if spec.kind is bool:
            group.add_argument(
                spec.flag,
                dest=dest,
                action=argparse.BooleanOptionalAction,
                help=f"{spec.meaning} (default: the scenario's)",
            )
        else:
            group.add_argument(
                spec.flag,
                dest=dest,
                metavar="VALUE",
                type=_knob_type(name),
                help=f"{spec.meaning} (default: the scenario's)",
            )


def _knob_type(name: str) -> Callable[[str], KnobValue]:
    """argparse's `type` for knob `name`: its one parser, its error as argparse's."""

    def parse(text: str) -> KnobValue:
        try:
            return knobs.parse(name, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name  # argparse names the type in "invalid <name> value"
    return parse


def scenario_with_flags(args: argparse.Namespace) -> Scenario:
    """The scenario `args` name, its serve args replaced by the flags given."""
    scenario = SCENARIOS[args.scenario]
    given = {name: getattr(args, f"serve_{name}", None) for name in knobs.twin_knobs()}
    given = {name: value for name, value in given.items() if value is not None}
    if not given:
        return scenario
    serve_args = dataclasses.replace(scenario.args, **given)  # type: ignore[arg-type]
    return dataclasses.replace(scenario, args=serve_args)


def build_parser() -> argparse.ArgumentParser:
    """`vtop sim`'s own parser (its errors and `--help` name `vtop sim`)."""
    return register(OneLineParser(prog="vtop").add_subparsers())


def main(argv: Sequence[str]) -> int:
    """`vtop sim …` (the words after `sim`); returns the exit code."""
    return run(build_parser().parse_args(list(argv)))


def started(
    scenario: str, url: str, version: str | None, speed: float, duration: float | None
) -> str:
    """The one line said when a server starts: what is served, where, and how it stops."""
    pace = "" if speed == 1 else f" at {speed:g}x real time"
    stops = "Ctrl-C stops" if duration is None else f"stops after {duration:g} s"
    return (
        f"vtop sim: serving scenario {scenario!r} as vLLM {version or 'unknown'} on "
        f"{url}/metrics{pace} ({stops})"
    )


def describe(out: TextIO) -> None:
    """The `--list` text: one block per scenario."""
    for sc in SCENARIOS.values():
        rule = sc.rule or "(none: baseline)"
        out.write(f"{sc.name}  -> rule {rule}\n  {sc.title}\n")
        out.write(_fill(sc.cause))
        out.write(f"\n  symptom: {sc.symptom}\n\n")


def _fill(text: str) -> str:
    """A scenario's prose at 96 columns, indented. Lines break at spaces only: textwrap's
    default breaks after a hyphen, which cut `--api-server-count` into `--api-` and
    `server-count`, a flag no one can copy."""
    return textwrap.fill(
        text,
        width=96,
        initial_indent="  ",
        subsequent_indent="  ",
        break_on_hyphens=False,
        break_long_words=False,
    )


def _error(msg: str) -> int:
    print(f"vtop sim: {msg}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    """Run `vtop sim` with parsed `args`; returns the process exit code."""
    if args.list:
        describe(sys.stdout)
        return EXIT_OK
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
    scenario = scenario_with_flags(args)
    servers: list[SimServer] = []
    try:
        for i in range(args.instances):
            twin = Twin(scenario, seed=args.seed + i, emulate_version=dialect)
            if not args.no_warmup:
                twin.warm_up()
            port = args.port + i if args.port else 0
            try:
                servers.append(serve(twin, args.host, port, args.speed))
            except OSError as exc:
                return _error(f"cannot listen on {args.host}:{port}: {exc.strerror or exc}")
            line = started(
                twin.scenario.name,
                servers[-1].url,
                twin.endpoint_info().version,
                args.speed,
                args.duration,
            )
            print(line, flush=True)
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        pass
    finally:
        for s in servers:
            s.close()
    return EXIT_OK
