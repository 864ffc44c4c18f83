"""Command line: arguments -> live TUI | --once | --report | --record | --replay | sim | rules.

`--replay FILE` (with or without `--train`) opens the replay screen when stdout is a terminal;
elsewhere it is headless: `--report`, or the text quiz for `--train` on a pipe. `--record FILE`
likewise shows the dashboard while it records when stdout is a terminal (`q` ends both, `r`
stops the recording and goes on watching); it records headless, until Ctrl-C, where there is
no terminal, with `--headless`, or with `--duration` (a timed capture is a script's).

Sub-commands (`vtop sim`, `vtop rules`, `vtop trace`) are dispatched on the first word; every
other invocation is the monitor, whose mode the flags choose. Errors the user can fix are one
line on stderr, never a traceback: a usage error exits 2, or 3 (UNKNOWN) when `--report` is on
the command line (vtop/usage.py says why); nothing could be read exits 3. The TUI is imported
only when it is about to run, so headless modes never load Textual.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from vtop import __version__, about, durations, usage
from vtop.cli import prometheus_args, targets_args
from vtop.monitor import Monitor
from vtop.report import cli as headless
from vtop.sources import discovery, prometheus, targets
from vtop.sources.base import FrameSource
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.netconfig import NetConfigError
from vtop.sources.sim import DEFAULT_SCENARIO, DEMO_RUNNING_S, SimSource
from vtop.sources.vllm import HeaderError, ScrapeOptions
from vtop.trace.recorder import Recorder
from vtop.triage.engine import Engine

EXIT_UNKNOWN = usage.EXIT_UNKNOWN


def build_parser(exit_code: int = usage.EXIT_USAGE) -> argparse.ArgumentParser:
    """The monitor's arguments; a usage error is one line and exits `exit_code`."""
    parser = usage.OneLineParser(
        prog="vtop",
        description="Monitor and triage vLLM servers. Sub-commands: sim, rules, trace, completion.",
    )
    parser.add_argument("--version", action=about.VersionAction)
    src = parser.add_argument_group("what to watch")
    src.add_argument(
        "--url",
        action="append",
        default=[],
        metavar="URL",
        help="vLLM server base URL (repeatable), e.g. http://localhost:8000",
    )
    targets_args.add_arguments(src)
    prometheus_args.add_arguments(src)
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
    src.add_argument(
        "--ca-cert",
        metavar="FILE",
        help="also trust the CA certificates in FILE (PEM, or a directory made by openssl "
        "rehash); SSL_CERT_FILE / SSL_CERT_DIR replace the system's store",
    )
    src.add_argument(
        "--insecure",
        action="store_true",
        help="do not verify TLS certificates (not with --ca-cert)",
    )
    src.add_argument(
        "--demo",
        nargs="?",
        const=DEFAULT_SCENARIO,
        metavar="SCENARIO",
        help=f"watch a built-in simulated vLLM (default scenario {DEFAULT_SCENARIO}; "
        "`vtop sim --list` names them)",
    )
    src.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="simulated seconds per second with --demo; a replay's starting speed (1-1000)",
    )
    src.add_argument("--seed", type=int, default=0, help="random seed of the simulation")
    knobs = parser.add_argument_group("configuration the server does not expose")
    knobs.add_argument(
        "--max-num-seqs",
        type=int,
        metavar="N",
        help="the server's --max-num-seqs (no metric exposes it): overrides what vtop reads "
        "from the local process or infers",
    )
    knobs.add_argument(
        "--max-num-batched-tokens",
        type=int,
        metavar="N",
        help="the server's --max-num-batched-tokens (no metric exposes it): overrides what "
        "vtop reads from the local process",
    )
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
        "--theme", default="dark", metavar="NAME", help="dark (default), light, or a Textual theme"
    )
    out.add_argument(
        "--once",
        action="store_true",
        help="poll twice, one interval apart, print one JSON document and exit",
    )
    out.add_argument(
        "--headless",
        action="store_true",
        help="with --record: record without the dashboard even on a terminal, until Ctrl-C "
        "(without a terminal it always is)",
    )
    headless.add_arguments(parser)
    parser.exit_code = exit_code
    return parser


def _fail(message: str, code: int = usage.EXIT_USAGE) -> int:
    print(f"vtop: {message}", file=sys.stderr)
    return code


def _live_source(args: argparse.Namespace, fleet: list[targets.Target]) -> LiveSource:
    options = ScrapeOptions.from_env(
        interval_s=args.interval, headers=args.header, insecure=args.insecure,
        ca_cert=args.ca_cert,
    )  # fmt: skip
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
        raise UsageError("--prometheus reads its instances from Prometheus: it cannot be "
                         "combined with --url, --discover or --demo")  # fmt: skip
    try:
        fleet = [t for path in args.targets for t in targets.load_targets(path)]
        options = ScrapeOptions.from_env(
            interval_s=args.interval, headers=args.header, insecure=args.insecure,
            ca_cert=args.ca_cert,
        )  # fmt: skip
        flags = discovery.flag_knobs(args.max_num_seqs, args.max_num_batched_tokens)
        per_instance = {t.instance: t.knobs() for t in fleet}
        return prometheus_args.from_args(args, options, flags=flags, instance_flags=per_instance)
    except (HeaderError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _engine(args: argparse.Namespace) -> Engine:
    """Shipped rules, the user's rule directory, then --rules; bad rules are reported, skipped."""
    engine = Engine.from_catalog([Path(d) for d in args.rules])
    for err in engine.errors:
        print(f"vtop: rule skipped: {err}", file=sys.stderr)
    return engine


DEMO_ONCE_POLLS = 300
"""`--demo --once` watches five simulated minutes: virtual time is free, window statistics
over two polls would hide symptoms that come in bursts (preemptions, waves), and the rules
need a few minutes of history before they may speak."""


async def _once(source: FrameSource, interval: float, polls: int,
                engine: Engine | None = None) -> dict[str, object]:  # fmt: skip
    from vtop import summary

    monitor = Monitor(capacity=max(16, polls), engine=engine)
    try:
        for i in range(polls):
            if i and isinstance(source, LiveSource):
                await asyncio.sleep(interval)
            monitor.feed(await source.poll())
    finally:
        await source.aclose()
    return {
        "vtop": __version__,
        "t": monitor.t,
        "endpoints": [summary.endpoint(v, nvml=monitor.gpu) for v in monitor.endpoints.values()],
        "gpu": summary.gpus(monitor.gpu),
    }


def _demo_source(args: argparse.Namespace) -> SimSource:
    from vtop.sim.scenarios import SCENARIOS

    if args.demo not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.demo!r}; `vtop sim --list` names them")
    if not args.speed > 0:
        raise UsageError("--speed must be positive")
    return SimSource.scenario(args.demo, seed=args.seed, interval_s=args.interval,
                              speed=args.speed, running_s=DEMO_RUNNING_S)  # fmt: skip


class UsageError(Exception):
    """A command line that cannot work; the message is the whole explanation."""


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
        raise UsageError("nothing to watch: give --url URL, --targets FILE, --discover, "
                         "--prometheus URL (or --demo)")  # fmt: skip
    try:
        return _live_source(args, fleet)
    except (HeaderError, NetConfigError) as exc:
        raise UsageError(str(exc)) from None


def run_monitor(args: argparse.Namespace, usage_code: int = usage.EXIT_USAGE) -> int:
    """Run the mode the flags choose; a usage error found here exits `usage_code` (3 under
    --report, see vtop/usage.py)."""
    if args.headless and not args.record:
        return _fail("--headless goes with --record FILE (it records without the dashboard)",
                     usage_code)  # fmt: skip
    if replay_screen_wanted(args):
        return run_replay_tui(args)
    if record_screen_wanted(args):
        return run_recording_tui(args)
    if headless.wanted(args) and not args.once:
        return _headless(args, usage_code)
    try:
        source = make_source(args)
    except UsageError as exc:
        return _fail(str(exc), usage_code)
    if args.once:
        polls = DEMO_ONCE_POLLS if args.demo else 2
        doc = asyncio.run(_once(source, args.interval, polls, _engine(args)))
        print(json.dumps(doc, indent=2, sort_keys=False))
        endpoints = doc["endpoints"]
        assert isinstance(endpoints, list)
        return 0 if any(e["status"] == "ok" for e in endpoints) else EXIT_UNKNOWN
    return run_tui(source, args)


def run_tui(source: FrameSource, args: argparse.Namespace,
            recorder: Recorder | None = None) -> int:  # fmt: skip
    """The live dashboard (recording from its first poll with `recorder`); Textual is imported
    only here."""
    from vtop.ui.app import VtopApp

    capacity = max(3600, math.ceil(3600 / args.interval))  # an hour at the poll interval
    try:
        monitor = Monitor(capacity=capacity, engine=_engine(args))
        app = VtopApp(source, monitor, interval=args.interval, theme=args.theme,
                      recorder=recorder)  # fmt: skip
    except ValueError as exc:
        if recorder is not None:
            recorder.close()
        return _fail(str(exc))
    if recorder is not None:  # a disk that fills up says so on the screen, not under it
        recorder.notify = lambda message: app.notify(message, severity="error", timeout=10)
    app.run()
    return app.return_code or 0  # 129 when the terminal hung up (vtop.ui.driver)


def record_screen_wanted(args: argparse.Namespace) -> bool:
    """`--record FILE` on a terminal (stdout and stderr): the dashboard, recording (not with
    --headless, a report, --once, --duration or a replay, which stay headless or are usage
    errors there)."""
    return (
        bool(args.record)
        and not (args.headless or args.report or args.once or args.duration)
        and not (args.replay or args.train)
        and sys.stdout.isatty()
        and sys.stderr.isatty()  # Textual draws on stderr: `2>log` must not fill log with it
    )


def run_recording_tui(args: argparse.Namespace) -> int:
    """The dashboard over the flags' source, recording every poll to `--record FILE`; after
    the screen closes, one line says what was recorded (as the headless recording does)."""
    from vtop.trace.writer import TraceWriteError

    try:
        source = make_source(args)
    except UsageError as exc:
        return _fail(str(exc))
    kind, seed = ("demo", f" (seed {args.seed})") if args.demo else ("live", "")
    try:
        recorder = Recorder(args.record, sources=[f"{kind} {n}{seed}" for n in
                                                  _names(args, source)],
                            interval_s=args.interval)  # fmt: skip
    except TraceWriteError as exc:
        asyncio.run(source.aclose())
        return _fail(str(exc))
    code = run_tui(source, args, recorder)
    recorder.close()  # closed already when the screen ended; a second close does nothing
    if recorder.error is not None:  # said on the screen, which is gone now
        return _fail(recorder.error, 1)
    if code == 0:
        print(f"vtop: recorded {recorder.polls} polls ({recorder.bytes / 1024:.1f} KiB) to "
              f"{recorder.path}", file=sys.stderr)  # fmt: skip
    return code


def _names(args: argparse.Namespace, source: FrameSource) -> list[str]:
    """What the source watches, for reports and recordings: the endpoints (URLs without
    secrets), the Prometheus query, or the simulated scenario."""
    if isinstance(source, prometheus.PrometheusSource):
        match = "{" + ",".join(source.match) + "}" if source.match else ""
        return [f"Prometheus {source.url}{match}"]
    if isinstance(source, LiveSource):
        return list(source.endpoints)
    return [args.demo]


def replay_screen_wanted(args: argparse.Namespace) -> bool:
    """`--replay FILE` (and `--train`) on a terminal get the screen; a pipe gets the text quiz,
    or the usage error that says to add --report."""
    return (
        bool(args.replay)
        and not (args.report or args.record or args.once)
        and (sys.stdout.isatty())
    )


def run_replay_tui(args: argparse.Namespace) -> int:
    """The replay (or training) screen; Textual is imported only here."""
    from vtop.sources.replay import ReplaySource
    from vtop.trace.reader import TraceError, TraceReader

    if args.url or args.demo:
        return _fail("give one of --url, --demo or --replay")
    if not 1.0 <= args.speed <= 1000.0:
        return _fail("--speed of a replay goes from 1 to 1000")
    pending: list[str] = []
    shown: list[Callable[[str], None]] = []

    def warn(message: str) -> None:  # the screen, once it runs; never stderr under it
        (shown[0] if shown else pending.append)(message)

    try:
        reader = TraceReader(args.replay, warn=warn)
    except TraceError as exc:
        return _fail(str(exc), EXIT_UNKNOWN)
    try:
        start = durations.parse_time(args.from_, reader.start, reader.end) if args.from_ else None
        end = durations.parse_time(args.to, reader.start, reader.end) if args.to else None
        if start is not None and end is not None and end < start:
            raise ValueError("--to is before --from")
    except ValueError as exc:
        reader.close()
        return _fail(str(exc))
    from vtop.ui.replay_app import ReplayApp

    source = ReplaySource(reader, speed=args.speed, start=start, end=end, playing=not args.train)
    capacity = max(3600, math.ceil(3600 / (reader.header.interval_s or 1.0)))
    try:
        app = ReplayApp(source, _engine(args), train=args.train, theme=args.theme,
                        capacity=capacity, warnings=pending)  # fmt: skip
    except ValueError as exc:
        reader.close()
        return _fail(str(exc))
    shown.append(lambda message: app.notify(message, severity="warning", timeout=10))
    app.run()
    if app.return_code:  # the terminal hung up: nothing to print to
        return app.return_code
    if app.session is not None:
        print(f"vtop: training on {reader.name}: {app.session.score.summary()}")
    return 0


def _headless(args: argparse.Namespace, usage_code: int = usage.EXIT_USAGE) -> int:
    """--report, --record, --replay … --report: vtop/report/cli.py runs them."""
    engine = _engine(args) if args.report else None  # the rules, --rules included
    if args.replay:
        return headless.run(args, None, [], engine)
    try:
        source = make_source(args)
    except UsageError as exc:
        return _fail(str(exc), usage_code)
    return headless.run(args, source, _names(args, source), engine)


def shipped_rule_tests() -> Path:
    """The shipped rules' own tests: `vtop/_rule_tests` in a wheel, `tests/rules` in a checkout
    (beside the shipped rules, as `vtop.triage.loader.shipped_dir` finds them)."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_rule_tests"
    return packaged if packaged.is_dir() else package.parent / "tests" / "rules"


def with_default_rule_tests(argv: list[str]) -> list[str]:
    """`rules test` without a path: `tests/rules` here, as before, else the shipped rules' tests
    (an installed vtop has no tests/rules), so `vtop rules test` proves the catalog anywhere."""
    if argv[:1] != ["test"] or any(not a.startswith("-") for a in argv[1:]) or "--" in argv:
        return argv
    if Path("tests/rules").is_dir():
        return argv
    return [*argv, str(shipped_rule_tests())]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A source's warnings (a GPU lost mid-run) reach stderr through logging's last-resort
    # handler, which looks stderr up at each write (so the TUI's capture still holds them);
    # they carry the same `vtop:` prefix as every other message of ours.
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(logging.Formatter("vtop: %(message)s"))
    if argv[:1] == ["rules"]:
        from vtop.triage.cli import main as rules_main

        return rules_main(with_default_rule_tests(argv[1:]))
    if argv[:1] == ["completion"]:
        from vtop.completion import main as completion_main

        return completion_main(argv[1:])
    if argv[:1] == ["trace"]:
        from vtop.trace.info import main as trace_main

        return trace_main(argv[1:])
    if argv[:1] == ["sim"]:
        from vtop.sim import command as sim_command

        sub = usage.OneLineParser(prog="vtop").add_subparsers()
        sim_command.register(sub)
        sim_args = sub.choices["sim"].parse_args(argv[1:])
        return sim_command.run(sim_args)
    code = usage.usage_exit_code(argv)
    args = build_parser(code).parse_args(argv)
    try:
        return run_monitor(args, code)
    except KeyboardInterrupt:
        return 130
