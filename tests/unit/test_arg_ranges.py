"""Every number the command line takes is checked against a stated range as it is parsed, and
every knob value a user types against its own (issue 26, points 9 and 11).

`--interval nan|inf|1e308`, `--speed 1e308` and `--duration 99999999d` used to run a `--demo
--report` for ever at full CPU; `--max-num-seqs 0`, `--set max_num_seqs=-5`, `nan`, `1e23` and
`kv_cache_dtype=evil` went through to the twin. Each is now one usage line (exit 2, or 3 under
--report) naming the flag and its range, and the range is in the flag's --help. A walk over
every parser of every sub-command finds any numeric flag still typed by bare `int` or `float`.
"""

from __future__ import annotations

import argparse
import io
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from vtop import knobs
from vtop.cli import ranges, train
from vtop.cli.dispatch import COMMANDS
from vtop.cli.dispatch import main as vtop_main
from vtop.cli.monitor import build_parser
from vtop.cli.rules_export import main as export_main
from vtop.model import Knob
from vtop.sources.targets import TargetsError, parse_targets
from vtop.whatif.sweep import configurations

ROOT = Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "traces" / "budget-too-small.vtrace")


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser a user reaches: the monitor's, each command's and their sub-commands'."""
    todo: list[tuple[str, argparse.ArgumentParser]] = [("vtop", build_parser())]
    todo += [(f"vtop {name}", cmd.parser()) for name, cmd in COMMANDS.items()]
    while todo:
        name, parser = todo.pop()
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(f"{name} {word}", p) for word, p in action.choices.items()]


NUMERIC_METAVARS = frozenset({"N", "SECONDS", "MS", "S", "PORT", "X", "DURATION", "TIME"})
"""What a flag that takes a number or a duration calls its value in --help. `--from`/`--to`
(WHEN) are times within a trace, checked against it (tests/unit/test_replay_window.py)."""


def test_no_numeric_flag_is_left_without_a_range() -> None:
    typed = 0
    for name, parser in parsers():
        for action in parser._actions:
            flag = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.type not in (int, float), f"{flag}: a bare {action.type}: give a range"
            kinds = ranges.Number | ranges.Duration | ranges.PromDuration | ranges.Knob
            if isinstance(action.type, kinds):
                typed += 1
                assert action.help is not None and action.type.shown() in action.help, flag
            else:  # a number typed as text (a duration read later) is no escape either
                assert action.metavar not in NUMERIC_METAVARS, f"{flag}: give it a range"
                numeric_default = isinstance(action.default, int | float)
                assert not numeric_default or isinstance(action.default, bool), flag
    assert typed >= 20  # the monitor's, sim's, whatif's and rules export's numbers and knobs


MONITOR_BAD = [
    ("--interval", ["nan", "inf", "-inf", "1e308", "0", "-1", "1e-9", "0.001"]),
    ("--speed", ["nan", "1e308", "0", "0.5", "1001"]),
    ("--seed", ["-1", "4294967296", "1e3"]),
    ("--max-num-seqs", ["0", "-5", "1e23", "99999999999999999999999", "nan"]),
    ("--max-num-batched-tokens", ["0", "-1", "1e23"]),
    ("--duration", ["99999999d", "0", "8d", "1e308m", "nan", "inf"]),
    ("--backfill", ["99999999d", "8d", "1e308m"]),
]


@pytest.mark.parametrize("report", [False, True])
@pytest.mark.parametrize(("flag", "values"), MONITOR_BAD)
def test_a_monitor_number_out_of_range_is_one_usage_line(
    capsys: pytest.CaptureFixture[str], flag: str, values: list[str], report: bool
) -> None:
    for value in values:
        argv = ["--demo", *(["--report"] if report else []), flag, value]
        with pytest.raises(SystemExit) as stopped:
            vtop_main(argv)
        assert stopped.value.code == (3 if report else 2), argv
        err = capsys.readouterr().err
        assert err.startswith(f"vtop: error: argument {flag}: "), err
        assert err.endswith(" (see vtop --help)\n") and err.count("\n") == 1, err


def test_the_message_says_the_range() -> None:
    for argv, said in [
        (["--interval", "nan"], "argument --interval: nan is not a number from 0.01 to 3600 s"),
        (["--speed", "1e308"], "argument --speed: 1e308 is not a number from 1 to 1000"),
        (["--duration", "99999999d"], "99999999d is not a duration above 0, up to 7d"),
        (["--max-num-seqs", "0"], "max_num_seqs=0: expected a whole number from 1 to 1048576"),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "vtop", "--demo", "--report", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 3 and said in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["sim", "--port", "65536"],
            "argument --port: 65536 is not a whole number from 0 to 65535",
        ),
        (["sim", "--port", "-1"], "argument --port"),
        (["sim", "--speed", "1e308"], "argument --speed: 1e308 is not a number from 0.01 to 1000"),
        (["sim", "--speed", "nan"], "argument --speed"),
        (["sim", "--instances", "0"], "argument --instances: 0 is not a whole number from 1"),
        (["sim", "--instances", "100000"], "argument --instances"),
        (["sim", "--seed", "-1"], "argument --seed"),
        (["sim", "--duration", "inf"], "argument --duration: inf is not a number above 0"),
        (["sim", "--duration", "nan"], "argument --duration"),
        (["whatif", "--replay", TRACE, "--interval", "nan"], "argument --interval"),
        (["whatif", "--url", "http://127.0.0.1:9", "--interval", "1e308"], "argument --interval"),
        (
            ["whatif", "--url", "http://127.0.0.1:9", "--duration", "99999999d"],
            "argument --duration: 99999999d is not a duration above 0, up to 1d",
        ),
        (["whatif", "--replay", TRACE, "--window", "0"], "argument --window"),
        (["whatif", "--replay", TRACE, "--max-itl-ms", "inf"], "argument --max-itl-ms"),
        (["whatif", "--replay", TRACE, "--max-ttft-s", "0"], "argument --max-ttft-s"),
        (
            ["whatif", "--url", "http://127.0.0.1:9", "--max-num-seqs", "-5"],
            "argument --max-num-seqs: max_num_seqs=-5: expected a whole number from 1 to 1048576",
        ),
    ],
)
def test_every_other_commands_numbers_have_ranges_too(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        vtop_main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vtop {argv[0]}: error: {said}"), err
    assert err.count("\n") == 1


def test_the_ranges_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, shown in [
        (
            [],
            [
                "poll interval (default 1 s; 0.01–3600 s)",
                "(1–1000)",
                "(0–4294967295)",
                "(1–1048576)",
                "above 0, up to 7d",
                "0 to 7d",
            ],
        ),
        (
            ["sim"],
            [
                "0: any free port; 0–65535)",
                "real time; 0.01–1000)",
                "(default: 1; 1–64)",
                "until Ctrl-C; above 0, up to 604800 s)",
            ],
        ),
        (["whatif"], ["above 0, up to 1d", "0.01–3600 s", "above 0, up to 60000 ms"]),
        (
            ["rules", "export"],
            ["evaluation interval; above 0, up to 1d)", "Prometheus's global; above 0, up to 1d)"],
        ),
    ]:
        with pytest.raises(SystemExit):
            vtop_main([*argv, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for piece in shown:
            assert piece in text, (argv, piece)


def test_ctrl_c_stops_a_demo_report_and_it_reports_what_it_simulated() -> None:
    """A week of simulated time would take hours: Ctrl-C ends it at the next poll, with the
    report of what was simulated (a second Ctrl-C would interrupt at once)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtop", "--demo", "--report", "--duration", "7d"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        busy = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        while busy.cpu_times().user < 4 and time.monotonic() < deadline:  # imported, simulating
            time.sleep(0.2)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        began = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert time.monotonic() - began < 30
    assert proc.returncode in (0, 1, 2, 3), err
    assert out.startswith("vtop report: "), (out[:200], err)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("item", "said"),
    [
        ("max_num_seqs=0", "max_num_seqs=0: expected a whole number from 1 to 1048576"),
        ("max_num_seqs=-5", "max_num_seqs=-5: expected a whole number from 1 to 1048576"),
        ("max_num_seqs=1e23", "max_num_seqs=1e23: expected a whole number from 1 to 1048576"),
        ("max_num_batched_tokens=" + "9" * 30, "expected a whole number from 1 to 16777216"),
        (
            "gpu_memory_utilization=nan",
            "gpu_memory_utilization=nan: expected a number above 0 up to 1",
        ),
        ("gpu_memory_utilization=0", "gpu_memory_utilization=0: expected a number above 0"),
        ("gpu_memory_utilization=1e23", "gpu_memory_utilization=1e23: expected a number"),
        ("kv_cache_dtype=evil", "kv_cache_dtype=evil: expected one of auto, bfloat16, fp8"),
        ("block_size=0", "block_size=0: expected a whole number from 1 to 1024"),
        ("max_model_len=nan", "max_model_len=nan: expected a whole number"),
        ("enable_prefix_caching=maybe", "enable_prefix_caching=maybe: expected true or false"),
    ],
)
def test_a_whatif_knob_out_of_range_names_the_knob_and_its_range(item: str, said: str) -> None:
    for sets, sweep in (([item], None), ([], item)):  # a --set, and a sweep of one value
        with pytest.raises(ValueError) as caught:
            configurations(sets, sweep)
        assert said in str(caught.value), caught.value
        assert str(caught.value).startswith(item.split("=", maxsplit=1)[0] + "=")


def test_whatif_says_a_bad_knob_in_one_line_before_reading_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for item in ("max_num_seqs=0", "kv_cache_dtype=evil", "gpu_memory_utilization=nan"):
        assert vtop_main(["whatif", "--replay", "/nonexistent.vtrace", "--set", item]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"vtop: {item}: expected ") and err.count("\n") == 1, err


def test_whatif_says_in_one_line_when_the_servers_own_max_model_len_outgrows_its_pool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--report` says "the twin failed (…)" for this; `vtop whatif` crashed with a traceback."""
    from vtop.cli import whatif
    from vtop.whatif.goals import Goals
    from vtop.whatif.watched import read_trace

    watched = read_trace(str(ROOT / "tests" / "fixtures" / "real-regimes" / "budget4.vtrace"))
    too_long = Knob("max_model_len", 10_000_000, "process", "its command line")
    watched = replace(watched, knobs={**watched.knobs, "max_model_len": too_long})
    code = whatif.run(
        watched,
        300.0,
        [{"max_num_seqs": 8}],
        Goals(),
        "text",
        source={"kind": "replay", "name": "budget4.vtrace"},
    )
    assert code == 3
    err = capsys.readouterr().err
    assert err.startswith("vtop: no prediction: the twin failed (ValueError: ")
    assert "cannot hold one max_model_len=10000000 sequence" in err and err.count("\n") == 1


def test_a_targets_file_knob_out_of_range_is_its_file_and_line() -> None:
    for label, said in [
        ("gpu_memory_utilization=nan", "f.txt:2: gpu_memory_utilization=nan: expected a number"),
        ("max_num_seqs=" + "9" * 30, "f.txt:2: max_num_seqs=999999999999999999999999999999:"),
        ("gpu_memory_utilization=1.5", "f.txt:2: gpu_memory_utilization=1.5: expected"),
    ]:
        with pytest.raises(TargetsError) as caught:
            parse_targets(f"http://a:1\nhttp://b:1 {label}\n", "f.txt")
        assert str(caught.value).startswith(said), caught.value


def test_rules_export_checks_a_knob_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert export_main(["--no-user", "--knob", "max_num_seqs=-5"]) == 2
    assert capsys.readouterr().err == (
        "vtop rules export: --knob max_num_seqs=-5: expected a whole number from 1 to 1048576\n"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--resolution", "0s"], "argument --resolution: 0s is not a duration above 0, up to 1d"),
        (
            ["--resolution", "9" * 400 + "s"],
            "argument --resolution: " + "9" * 39 + "… is not a duration above 0, up to 1d",
        ),
        (["--resolution", "1e3"], "argument --resolution: 1e3 is not a duration like 15s or 1m"),
        (["--interval", "0ms"], "argument --interval: 0ms is not a duration above 0, up to 1d"),
        (["--interval", "2d"], "argument --interval: 2d is not a duration above 0, up to 1d"),
        (["--interval", "nan"], "argument --interval: nan is not a duration like 15s or 1m"),
    ],
)
def test_rules_export_durations_have_a_range(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        export_main(["--no-user", *argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vtop rules export: error: {said}"), err
    assert err.count("\n") == 1


def test_rules_export_takes_the_durations_in_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert export_main(["--no-user", "--resolution", "15s", "--interval", "1m30s"]) == 0
    out = capsys.readouterr().out
    assert ":15s]" in out and "interval: 1m30s" in out


def test_a_training_answer_out_of_range_is_said_and_asked_again() -> None:
    asked: list[str] = []
    answers = iter(["0", "nan", "1e23", "64"])
    out = io.StringIO()

    def read() -> str:
        asked.append("?")
        return next(answers) + "\n"

    direction, value = train._change("max_num_seqs", read, out)
    assert (direction, value) == (None, 64)
    lines = out.getvalue().splitlines()
    said = [line.partition("value: ")[2].strip() for line in lines if "expected" in line]
    assert said == [
        "max_num_seqs=0: expected a whole number from 1 to 1048576",
        "max_num_seqs=nan: expected a whole number from 1 to 1048576",
        "max_num_seqs=1e23: expected a whole number from 1 to 1048576",
    ]
    assert len(asked) == 4
    dtype = train._change("kv_cache_dtype", iter(["evil\n", "fp8\n"]).__next__, io.StringIO())
    assert dtype == (None, "fp8")
    assert train._change("max_num_seqs", iter(["lower\n"]).__next__, io.StringIO()) == (
        "lower",
        None,
    )


def test_each_knob_range_admits_its_defaults_and_refuses_the_hostile_values() -> None:
    for name, spec in ((n, s.range) for n, s in knobs.KNOBS.items() if s.range):
        for hostile in (float("nan"), float("inf"), -5, 0 if spec.lo > 0 or spec.lo_open else -1):
            if spec.kind in (int, float):
                assert not spec.admits(hostile), (name, hostile)
    fine: list[tuple[str, knobs.KnobValue]] = [
        ("max_num_seqs", 256),
        ("gpu_memory_utilization", 0.9),
        ("kv_cache_dtype", "auto"),
        ("enable_prefix_caching", True),
        ("long_prefill_token_threshold", 0),
        ("block_size", 16),
    ]
    for name, value in fine:
        assert knobs.check(name, value) == value
